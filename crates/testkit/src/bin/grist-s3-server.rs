//! An S3-compatible server for benchmarks and manual tests:
//! `grist-s3-server --root DIR [--latency-ms 20] [--port P]`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use grist_testkit::S3Server;

/// Serves a folder over S3 on 127.0.0.1: each subfolder is a bucket.
#[derive(Debug, Parser)]
struct Args {
    /// The folder to serve.
    #[arg(long)]
    root: PathBuf,
    /// A delay before each request is served, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

fn main() {
    let args = Args::parse();
    let server = match S3Server::builder(&args.root)
        .with_port(args.port)
        .with_latency(Duration::from_millis(args.latency_ms))
        .start()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("grist-s3-server: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "grist-s3-server: serving {} at {} (each folder is a bucket); stop with Ctrl-C",
        server.root().display(),
        server.endpoint()
    );
    for (key, value) in server.env() {
        println!("export {key}={value}");
    }
    loop {
        std::thread::park();
    }
}
