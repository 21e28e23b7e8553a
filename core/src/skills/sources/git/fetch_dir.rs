//! The private temporary folder one fetch writes into, removed when dropped.

use std::path::{Path, PathBuf};

use super::super::SourceError;

/// A private temporary folder for one fetch under `parent`, removed when dropped.
#[derive(Debug)]
pub struct FetchDir {
    path: PathBuf,
}

impl FetchDir {
    /// Makes `<parent>/fetch-<random>` (0700).
    pub fn create(parent: &Path) -> Result<Self, SourceError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::create_dir_all(parent).map_err(|e| SourceError::Io {
            path: parent.to_path_buf(),
            source: e,
        })?;
        let id = crate::random::hex(
            &crate::random::SystemSource::default(),
            8,
            "fetch folder name",
        )
        .map_err(|e| SourceError::Io {
            path: parent.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        let name = format!("fetch-{id}");
        let path = parent.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| SourceError::Io {
                path: path.clone(),
                source: e,
            })?;
        Ok(Self { path })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FetchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
