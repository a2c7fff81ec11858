//! Every `.zir` and JSON format version this build reads keeps loading: one
//! file of each version (tests/data/format/vN.zir and vN.json, the same
//! module) must parse, verify and equal the current form.

use std::path::PathBuf;
use zyntax_hir::version::{FORMAT_HISTORY, FORMAT_VERSION};
use zyntax_hir::{parse_module_named, print_module, verify_module, Module};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/format")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap_or_else(|e| {
        panic!("{name}: {e} (each format version needs a fixture file: see docs/embedding.md)")
    })
}

#[test]
fn every_version_loads_and_is_the_same_module() {
    let current = parse_module_named(&read(&format!("v{FORMAT_VERSION}.zir")), None).unwrap();
    for v in 1..=FORMAT_VERSION {
        let name = format!("v{v}.zir");
        let m = parse_module_named(&read(&name), Some(&name)).unwrap_or_else(|e| panic!("{e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m, current, "{name}");
        let name = format!("v{v}.json");
        let j = Module::from_json(&read(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(j, current, "{name}");
    }
}

#[test]
fn fixtures_declare_their_version() {
    assert!(!read("v1.zir").contains("version("));
    assert!(!read("v1.json").contains("format_version"));
    for v in 2..=FORMAT_VERSION {
        assert!(read(&format!("v{v}.zir")).contains(&format!(" version({v})")));
        assert!(read(&format!("v{v}.json")).starts_with(&format!("{{\"format_version\":{v},")));
    }
}

#[test]
fn writers_write_the_current_version() {
    let m = parse_module_named(&read("v1.zir"), None).unwrap();
    let text = print_module(&m);
    assert!(
        text.starts_with(&format!("module \"saxpy\" version({FORMAT_VERSION}) ")),
        "{text}"
    );
    let json = m.to_json().unwrap();
    assert!(
        json.starts_with(&format!("{{\"format_version\":{FORMAT_VERSION},")),
        "{json}"
    );
    assert_eq!(Module::from_json(&json).unwrap(), m);
    assert_eq!(read(&format!("v{FORMAT_VERSION}.json")), json);
}

#[test]
fn history_covers_every_version() {
    let versions: Vec<u32> = FORMAT_HISTORY.iter().map(|c| c.version).collect();
    assert_eq!(versions, (2..=FORMAT_VERSION).collect::<Vec<_>>());
}

#[test]
fn newer_or_malformed_json_versions_are_refused() {
    let json = read(&format!("v{FORMAT_VERSION}.json"));
    let newer = json.replacen(
        &format!("\"format_version\":{FORMAT_VERSION}"),
        &format!("\"format_version\":{}", FORMAT_VERSION + 1),
        1,
    );
    let e = Module::from_json(&newer).unwrap_err().to_string();
    assert!(e.contains("newer than this zyntax reads"), "{e}");
    let bad = json.replacen(&format!(":{FORMAT_VERSION},"), ":\"two\",", 1);
    let e = Module::from_json(&bad).unwrap_err().to_string();
    assert!(e.contains("is not a version number"), "{e}");
}

/// Writes the JSON fixture of the current version (run by hand when the
/// version is bumped: `cargo test -p zyntax-hir --test format_versions -- --ignored`).
#[test]
#[ignore = "writes tests/data/format; run by hand when FORMAT_VERSION changes"]
fn write_current_json_fixture() {
    let m = parse_module_named(&read(&format!("v{FORMAT_VERSION}.zir")), None).unwrap();
    std::fs::write(
        data(&format!("v{FORMAT_VERSION}.json")),
        m.to_json().unwrap(),
    )
    .unwrap();
}
