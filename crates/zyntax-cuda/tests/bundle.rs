//! AOT bundles from Rust: `tests/data/bundle/saxpy.{fatbin,json}` (built by
//! `zyntax.aot.build_bundle(saxpy, ["sm_70", "sm_80", "sm_90"], ...)`, so SASS
//! for three archs plus sm_90 PTX). The checks before the device run everywhere;
//! loading and launching need a GPU.

use std::path::{Path, PathBuf};
use zyntax_cuda::bundle::{parse_fatbin, read_bundle};
use zyntax_cuda::{Bundle, Device, DeviceBuffer, KernelArg, LaunchConfig, LoadedFrom};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/bundle")
}

/// A copy of the bundle in a fresh directory, to damage.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["saxpy.fatbin", "saxpy.json"] {
        std::fs::copy(data().join(f), dir.path().join(f)).unwrap();
    }
    let p = dir.path().join("saxpy.fatbin");
    (dir, p)
}

#[test]
fn reads_and_checks_the_bundle() {
    let (_, manifest, image) = read_bundle(&data().join("saxpy.fatbin")).unwrap();
    let recs = parse_fatbin(&image).unwrap();
    let sass: Vec<_> = recs
        .iter()
        .filter(|r| !r.ptx)
        .map(|r| r.arch.as_str())
        .collect();
    assert_eq!(sass, ["sm_70", "sm_80", "sm_90"]);
    assert_eq!(manifest["ptx"], "sm_90");
    // The manifest path works as well as the image's.
    assert!(read_bundle(&data().join("saxpy.json")).is_ok());
}

#[test]
fn damaged_bundles_are_errors() {
    let expect_err = |p: &Path, what: &str| {
        let e = read_bundle(p).expect_err("a damaged bundle must not read");
        assert!(e.to_string().contains(what), "{e} (wanted: {what})");
    };
    let (_d, p) = copy();
    let img = std::fs::read(&p).unwrap();
    std::fs::write(&p, &img[..img.len() - 10]).unwrap();
    expect_err(&p, "truncated or replaced");

    let (_d, p) = copy();
    let mut flipped = img.clone();
    flipped[img.len() / 2] ^= 0xff;
    std::fs::write(&p, &flipped).unwrap();
    expect_err(&p, "SHA-256");

    let (_d, p) = copy();
    let m = p.with_extension("json");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, text.replace("\"sm_70\",", "")).unwrap();
    expect_err(&p, "holds SASS");

    let (_d, p) = copy();
    std::fs::write(p.with_extension("json"), "[".repeat(100_000)).unwrap();
    expect_err(&p, "manifest");

    let (_d, p) = copy();
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    expect_err(&p, "not a regular file");
}

#[test]
#[ignore = "needs a GPU"]
fn loads_and_launches_on_the_gpu() {
    let dev = Device::get(0).unwrap();
    let b = Bundle::load(&dev, &data().join("saxpy.fatbin")).unwrap();
    let cc = dev.props().compute_capability;
    let expect = if cc.0 == 9 || cc.0 == 8 || cc.0 == 7 {
        LoadedFrom::Sass
    } else {
        LoadedFrom::Ptx
    };
    assert_eq!(b.loaded_from, expect);
    assert_eq!(b.kernel_names(), ["saxpy"]);
    let n = 4099u32;
    let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 31) as f32 - 7.0).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    let k = b.kernel("saxpy").unwrap();
    // SAFETY: saxpy touches n elements of x and y, both of which hold n.
    unsafe {
        k.launch(
            &LaunchConfig::for_n(u64::from(n), 256),
            None,
            &[
                KernelArg::Int(n.into()),
                KernelArg::Float(3.0),
                KernelArg::Buffer(&dx),
                KernelArg::Buffer(&dy),
            ],
        )
        .unwrap();
    }
    let got: Vec<f32> = dy.to_vec().unwrap();
    for i in 0..n as usize {
        assert_eq!(got[i], 3.0f32.mul_add(x[i], y[i]), "element {i}");
    }
    // Arguments are checked against the manifest's types.
    let bad = unsafe {
        k.launch(
            &LaunchConfig::for_n(u64::from(n), 256),
            None,
            &[KernelArg::Int(n.into()), KernelArg::Float(3.0)],
        )
    };
    assert!(bad.is_err());
}
