// Builds letter.fodt in the working folder with the skbdoc package and prints what it
// wrote, as document-building skills do with their npm packages.
const fs = require("fs");
const { letter } = require("skbdoc");

const text = process.argv[2] || "Hello from a Node script";
const body = letter(text);
fs.writeFileSync("letter.fodt", body);
console.log(JSON.stringify({ file: "letter.fodt", bytes: Buffer.byteLength(body), builder: require("skbdoc").version }));
