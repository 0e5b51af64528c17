#!/usr/bin/env node
import "../dist/sidecar/main.js";
