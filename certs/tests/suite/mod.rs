mod chain;
mod common;
mod digest;
mod issue;
mod profile;
mod rotation;
mod signature_file;
mod tampering;
