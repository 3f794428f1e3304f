//! The README's Rust example is the crate-doc example that `cargo test --doc` compiles and runs.

#[test]
fn readme_rust_example_is_the_doc_tested_one() {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("## Rust\n")
        .nth(1)
        .expect("README has a Rust section");
    let block = section
        .split("```rust\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let as_doc: Vec<String> = block
        .lines()
        .map(|line| {
            if line.is_empty() {
                "//!".to_string()
            } else {
                format!("//! {line}")
            }
        })
        .collect();
    assert!(
        include_str!("../src/lib.rs").contains(&as_doc.join("\n")),
        "lib.rs lacks:\n{block}"
    );
}
