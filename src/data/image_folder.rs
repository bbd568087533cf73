//! ImageFolder: `root/<class>/<image>` with classes in sorted order, decoded by the `image` crate.

use super::transforms::to_tensor;
use super::{Dataset, Sample};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Images in one sub-directory per class.
pub struct ImageFolder {
    /// Class names (sub-directory names, sorted); a label is an index here.
    pub classes: Vec<String>,
    items: Vec<(PathBuf, i32)>,
}

const EXTS: [&str; 6] = ["png", "jpg", "jpeg", "bmp", "gif", "webp"];

impl ImageFolder {
    /// Index `root`.
    pub fn new(root: impl AsRef<Path>) -> Result<ImageFolder> {
        let root = root.as_ref();
        let io = |p: &Path, e: std::io::Error| Error::Io {
            path: p.display().to_string(),
            source: e,
        };
        let mut classes: Vec<String> = std::fs::read_dir(root)
            .map_err(|e| io(root, e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        classes.sort();
        if classes.is_empty() {
            return Err(io(
                root,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no class sub-directories found",
                ),
            ));
        }
        let mut items = Vec::new();
        for (ci, c) in classes.iter().enumerate() {
            let d = root.join(c);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
                .map_err(|e| io(&d, e))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.extension()
                        .map(|x| EXTS.contains(&x.to_string_lossy().to_lowercase().as_str()))
                        .unwrap_or(false)
                })
                .collect();
            files.sort();
            items.extend(files.into_iter().map(|f| (f, ci as i32)));
        }
        Ok(ImageFolder { classes, items })
    }
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.items.len()
    }
    fn get(&self, i: usize) -> Result<Sample> {
        super::check_index("ImageFolder", i, self.len())?;
        let (p, y) = &self.items[i];
        let img = image::open(p).map_err(|e| Error::Io {
            path: p.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("cannot decode image: {e}"),
            ),
        })?;
        Ok((to_tensor(&img)?, *y))
    }
}
