//! Compiles CRIU's network image schemas (`proto/criu/*.proto`, MIT, carried unchanged) into
//! Rust with `protox` (no system `protoc`) and `prost-build`; the output is included by
//! `src/images/pb.rs`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const DIR: &str = "proto/criu";
    println!("cargo:rerun-if-changed={DIR}");
    let fds = protox::compile([format!("{DIR}/netdev.proto")], [DIR])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
