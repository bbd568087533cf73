//! ImageFolder: `root/<class>/<image>` with classes in sorted order, decoded by the `image` crate.

use super::transforms::to_tensor;
use super::{Dataset, Sample};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Images in one sub-directory per class (torchvision's `ImageFolder`): `root/<class>/<image>`,
/// classes in sorted order (label = index in [`ImageFolder::classes`]), images sorted by path
/// within a class. Files ending in png, jpg, jpeg, bmp, gif or webp count (case-insensitive);
/// the decoders built in are PNG and JPEG. Samples are `[3, H, W]` f32 in [0, 1]
/// ([`super::transforms::to_tensor`]), decoded on each `get`; give images of different sizes a
/// [`super::transforms::Resize`] before batching.
///
/// ```
/// use wgtorch::data::{Dataset, ImageFolder};
/// let root = std::env::temp_dir().join(format!("wgtorch-doc-imgs-{}", std::process::id()));
/// for class in ["cat", "dog"] {
///     std::fs::create_dir_all(root.join(class)).unwrap();
///     image::RgbImage::new(5, 4).save(root.join(class).join("a.png")).unwrap();
/// }
/// let ds = ImageFolder::new(&root)?;
/// assert_eq!(ds.classes, ["cat", "dog"]);
/// let (img, label) = ds.get(1)?;
/// assert_eq!((img.shape(), label), (&[3usize, 4, 5][..], 1));
/// std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct ImageFolder {
    /// Class names (sub-directory names, sorted); a label is an index here.
    pub classes: Vec<String>,
    items: Vec<(PathBuf, i32)>,
}

const EXTS: [&str; 6] = ["png", "jpg", "jpeg", "bmp", "gif", "webp"];

impl ImageFolder {
    /// Index `root` (file names only; images are decoded by `get`, where an undecodable file
    /// is an [`Error::Io`] naming it). An unreadable `root`, or one without class
    /// sub-directories, is an [`Error::Io`].
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
