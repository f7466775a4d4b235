fn main() {
    println!("netprobe: under construction");
}
