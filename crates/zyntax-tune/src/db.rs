//! Tuning documents on disk: one JSON file per kernel hash, signed with the
//! cache's HMAC and written atomically.
//!
//! The MAC is the one `zyntax.frontend.cache.mac` computes for kind `autotune`
//! (HMAC-SHA256 over `[kind, name, sha256(b""), document less "mac"]` written as
//! Python's canonical JSON), so files written by either side verify on the other.
//! Where the secret comes from (the cache's `signing.key` and its ownership
//! checks) is the caller's business: Python reads it in `zyntax.frontend.cache`.

use crate::digest::{hex, hmac_sha256, same, sha256};
use crate::pyjson::dumps_canonical;
use crate::record::{check_db, MAX_DB_BYTES};
use crate::{Rejected, Result};
use serde_json::{json, Value};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The MAC kind of tuning files in the cache.
pub const MAC_KIND: &str = "autotune";

/// The HMAC of `doc` (less its `mac` field) under `secret`, for `kernel_hash`.
pub fn db_mac(secret: &[u8], kernel_hash: &str, doc: &Value) -> String {
    let mut body = doc.clone();
    if let Some(m) = body.as_object_mut() {
        m.remove("mac");
    }
    let msg = json!([MAC_KIND, kernel_hash, hex(&sha256(b"")), body]);
    hex(&hmac_sha256(secret, dumps_canonical(&msg).as_bytes()))
}

/// Whether `doc["mac"]` is the MAC of `doc` under `secret`.
pub fn signed(secret: &[u8], kernel_hash: &str, doc: &Value) -> bool {
    let Some(got) = doc.get("mac").and_then(Value::as_str) else {
        return false;
    };
    got.len() == 64 && same(got, &db_mac(secret, kernel_hash, doc))
}

/// Whether `h` names a tuning file (64 lower-case hex digits): no path games.
pub fn is_kernel_hash(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The tuning file of `kernel_hash` in `dir`.
pub fn db_path(dir: &Path, kernel_hash: &str) -> PathBuf {
    dir.join(format!("{kernel_hash}.json"))
}

/// Why a read failed: the file is absent, or it was refused (and why).
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    Missing,
    Rejected(Rejected),
}

fn read_bounded(path: &Path) -> std::result::Result<Vec<u8>, ReadError> {
    let name = path
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into());
    let refused = |why: String| ReadError::Rejected(Rejected(format!("{name}: {why}")));
    // Looked at before opening: a planted symlink is not followed, a FIFO not
    // opened (it would block). The folder is the caller's private, checked one.
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => return Err(refused(e.to_string())),
        Ok(m) if !m.file_type().is_file() => {
            return Err(refused("not a regular file".into()));
        }
        Ok(_) => {}
    }
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => return Err(refused(e.to_string())),
    };
    let meta = f.metadata().map_err(|e| refused(e.to_string()))?;
    if !meta.is_file() {
        return Err(refused("not a regular file".into()));
    }
    let mut data = Vec::new();
    (&mut f)
        .take(MAX_DB_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| refused(e.to_string()))?;
    if data.len() as u64 > MAX_DB_BYTES {
        return Err(refused(format!("larger than {MAX_DB_BYTES} bytes")));
    }
    Ok(data)
}

/// The checked tuning document of `kernel_hash` in `dir`, `mac` removed. With
/// `secret` it must carry that MAC (a forged or foreign file is refused).
pub fn read_db(
    dir: &Path,
    kernel_hash: &str,
    secret: Option<&[u8]>,
) -> std::result::Result<Value, ReadError> {
    if !is_kernel_hash(kernel_hash) {
        return Err(ReadError::Rejected(Rejected(format!(
            "{kernel_hash:?} is not a kernel hash"
        ))));
    }
    let data = read_bounded(&db_path(dir, kernel_hash))?;
    let mut doc = parse_db(&data).map_err(ReadError::Rejected)?;
    if let Some(s) = secret {
        if !signed(s, kernel_hash, &doc) {
            return Err(ReadError::Rejected(Rejected(
                "not signed by this cache".into(),
            )));
        }
    }
    check_db(&doc).map_err(ReadError::Rejected)?;
    if let Some(m) = doc.as_object_mut() {
        m.remove("mac");
    }
    Ok(doc)
}

/// A tuning document from JSON bytes (not yet checked; [`check_db`] does that).
pub fn parse_db(data: &[u8]) -> Result<Value> {
    // serde_json refuses nesting over 128 levels and NaN / Infinity, as we want.
    serde_json::from_slice(data).map_err(|e| Rejected(format!("not JSON: {e}")))
}

/// Writes `doc` (its `mac` replaced by one under `secret`, if given) to the
/// tuning file of `kernel_hash` in `dir`: a temporary file renamed into place, so
/// readers see the old file or the new one, never a part.
pub fn write_db(
    dir: &Path,
    kernel_hash: &str,
    doc: &Value,
    secret: Option<&[u8]>,
) -> std::io::Result<()> {
    if !is_kernel_hash(kernel_hash) {
        return Err(std::io::Error::other(format!(
            "{kernel_hash:?} is not a kernel hash"
        )));
    }
    let mut out = doc.clone();
    if let Some(m) = out.as_object_mut() {
        m.remove("mac");
        if let Some(s) = secret {
            let mac = db_mac(s, kernel_hash, doc);
            m.insert("mac".into(), mac.into());
        }
    }
    let text = serde_json::to_string_pretty(&out)? + "\n";
    fs::create_dir_all(dir)?;
    let path = db_path(dir, kernel_hash);
    let tmp = dir.join(format!(
        ".{kernel_hash}.json.{}.{}.tmp",
        std::process::id(),
        unique()
    ));
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        // No fsync: the rename keeps readers from partial files and the MAC and
        // schema checks catch whatever a crash leaves behind.
        fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::empty_db;

    const H: &str = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";

    #[test]
    fn signed_files_round_trip_and_forgeries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = [7u8; 32];
        assert_eq!(
            read_db(dir.path(), H, Some(&secret)),
            Err(ReadError::Missing)
        );
        let doc = empty_db();
        write_db(dir.path(), H, &doc, Some(&secret)).unwrap();
        assert_eq!(read_db(dir.path(), H, Some(&secret)).unwrap(), doc);
        // Another cache's secret: refused.
        let other = read_db(dir.path(), H, Some(&[8u8; 32]));
        assert!(matches!(other, Err(ReadError::Rejected(r)) if r.0.contains("not signed")));
        // Edited after signing (a record planted with the old MAC kept): refused.
        let path = db_path(dir.path(), H);
        let text = fs::read_to_string(&path).unwrap();
        let forged = text.replace("\"records\": {}", "\"records\": {\"x\": 1}");
        assert_ne!(forged, text);
        fs::write(&path, forged).unwrap();
        assert!(matches!(
            read_db(dir.path(), H, Some(&secret)),
            Err(ReadError::Rejected(_))
        ));
        // Unsigned files are read only without a secret (the repository's bundled tables).
        write_db(dir.path(), H, &doc, None).unwrap();
        assert!(read_db(dir.path(), H, Some(&secret)).is_err());
        assert_eq!(read_db(dir.path(), H, None).unwrap(), doc);
        // Not a kernel hash: no path is built from it.
        assert!(read_db(dir.path(), "../x", None).is_err());
        assert!(write_db(dir.path(), "../x", &doc, None).is_err());
    }

    #[test]
    fn mac_matches_python() {
        // zyntax.frontend.cache.mac(b"k" * 32, "autotune", "e" * 64, b"", doc) in CPython.
        let doc = json!({"version": 2, "kernel": "k\u{e9}", "records": {}, "mac": "ignored"});
        assert_eq!(
            db_mac(&[b'k'; 32], H, &doc),
            "c357cfd375fdbb8d8b4f9229a0e7f6741e5cc8c49f93e2d272721d12a47aec39"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_and_oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.json");
        fs::write(&target, empty_db().to_string()).unwrap();
        std::os::unix::fs::symlink(&target, db_path(dir.path(), H)).unwrap();
        assert!(matches!(
            read_db(dir.path(), H, None),
            Err(ReadError::Rejected(_))
        ));
        fs::remove_file(db_path(dir.path(), H)).unwrap();
        fs::write(
            db_path(dir.path(), H),
            vec![b' '; MAX_DB_BYTES as usize + 1],
        )
        .unwrap();
        assert!(matches!(
            read_db(dir.path(), H, None),
            Err(ReadError::Rejected(_))
        ));
    }
}
