// Builds a report of 20,000 rows in memory, as document-building skills do, and prints
// its size: V8 and its heap under the default 256 MiB limit.
const rows = [];
for (let i = 0; i < 20000; i++) rows.push({ n: i, label: `row ${i}`, value: i * 7 });
const body = rows.map((r) => `${r.n}\t${r.label}\t${r.value}`).join("\n");
console.log(JSON.stringify({ rows: rows.length, bytes: Buffer.byteLength(body), node: process.version }));
