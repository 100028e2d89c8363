//! Builds the small C helper that gives coordis Redis's exact number handling
//! (`strtod`/`strtold` parsing and `long double` arithmetic and printing).
fn main() {
    println!("cargo:rerun-if-changed=csrc/redisnum.c");
    cc::Build::new()
        .file("csrc/redisnum.c")
        .opt_level(2)
        .compile("redisnum");
}
