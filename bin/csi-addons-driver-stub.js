#!/usr/bin/env node
import "../dist/driver-stub/main.js";
