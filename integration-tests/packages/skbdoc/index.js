// skbdoc: a letter as an OpenDocument text file (flat XML). A stand-in for the npm
// packages document-building skills use (docx, pptxgenjs), served by the test registries
// (integration-tests/tests/harness/npm_registry.rs; the compose suite's pyindex).
const escape = (t) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;");
exports.version = "1.2.0";
exports.letter = (text) => '<?xml version="1.0" encoding="UTF-8"?>\n' +
  '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" ' +
  'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" ' +
  'office:mimetype="application/vnd.oasis.opendocument.text"><office:body><office:text>' +
  "<text:p>" + escape(text) + "</text:p></office:text></office:body></office:document>\n";
