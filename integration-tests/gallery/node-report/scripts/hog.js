// Keeps allocating until the call's memory limit stops it (reported as resource_limit).
const kept = [];
for (;;) kept.push(Buffer.alloc(1 << 20, 1));
