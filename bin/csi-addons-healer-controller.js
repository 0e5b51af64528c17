#!/usr/bin/env node
import "../dist/controller/main.js";
