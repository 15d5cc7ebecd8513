// A Rust worker, standard library only (Rust 1.63 or later): `rustc --edition 2018 worker.rs`.
// It publishes STEPS updates (argument 1, default 3) to the daemon socket in
// $MCP_PROGRESS_SOCKET under $MCP_PROGRESS_TOKEN, stops early on a cancel, and ends with a done
// whose ack it waits for. Unix sockets only: on Windows open the pipe as a file instead.
use std::env;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A JSON string literal: quotes, backslashes and control characters escaped.
fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One frame: {"type":KIND,"data":{"v":1,"progressToken":TOKEN,FIELDS}} and a form feed.
fn send(socket: &mut UnixStream, kind: &str, token: &str, fields: &str) -> std::io::Result<()> {
    let frame = format!(
        "{{\"type\":\"{}\",\"data\":{{\"v\":1,\"progressToken\":{}{}}}}}\x0c",
        kind,
        json_string(token),
        fields
    );
    socket.write_all(frame.as_bytes())
}

/// Frames the daemon sent within `wait`, split on the form feed (the daemon writes compact JSON).
fn receive(socket: &mut UnixStream, inbox: &mut Vec<u8>, wait: Duration) -> Vec<String> {
    socket.set_read_timeout(Some(wait)).ok();
    let mut chunk = [0u8; 4096];
    match socket.read(&mut chunk) {
        Ok(n) => inbox.extend_from_slice(&chunk[..n]),
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {}
        Err(_) => {}
    }
    let mut frames = Vec::new();
    while let Some(end) = inbox.iter().position(|&b| b == 0x0c) {
        let frame: Vec<u8> = inbox.drain(..=end).collect();
        frames.push(String::from_utf8_lossy(&frame[..end]).into_owned());
    }
    frames
}

/// The text of `"key":"..."` in a frame (enough for a cancel's reason).
fn field<'a>(frame: &'a str, key: &str) -> Option<&'a str> {
    let start = frame.find(&format!("\"{}\":\"", key))? + key.len() + 4;
    frame[start..].find('"').map(|end| &frame[start..start + end])
}

fn main() {
    let steps: u32 = env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let (path, token) = match (env::var("MCP_PROGRESS_SOCKET"), env::var("MCP_PROGRESS_TOKEN")) {
        (Ok(path), Ok(token)) if !path.is_empty() && !token.is_empty() => (path, token),
        _ => {
            eprintln!("set MCP_PROGRESS_SOCKET and MCP_PROGRESS_TOKEN (mcp-progress run does)");
            std::process::exit(2);
        }
    };
    let mut socket = match UnixStream::connect(&path) {
        Ok(socket) => socket,
        Err(error) => {
            // Progress must never fail the job: say so, and do the work anyway.
            eprintln!("no daemon on {}: {}", path, error);
            std::process::exit(0);
        }
    };
    let mut inbox = Vec::new();
    let mut cancelled: Option<String> = None;
    send(&mut socket, "claim", &token, "").ok();
    for step in 1..=steps {
        let fields = format!(",\"progress\":{},\"total\":{},\"message\":{}", step, steps, json_string(&format!("step {}", step)));
        send(&mut socket, "progress", &token, &fields).ok();
        // The work of one step; a cancel from the MCP side ends it early.
        for frame in receive(&mut socket, &mut inbox, Duration::from_millis(100)) {
            if frame.contains("\"type\":\"cancel\"") {
                cancelled = Some(field(&frame, "reason").unwrap_or("").to_string());
            }
        }
        if cancelled.is_some() {
            break;
        }
    }
    let status = if cancelled.is_some() { "cancelled" } else { "ok" };
    send(&mut socket, "done", &token, &format!(",\"status\":\"{}\",\"message\":\"the result\",\"seq\":1", status)).ok();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut acked = false;
    while !acked && Instant::now() < deadline {
        acked = receive(&mut socket, &mut inbox, Duration::from_millis(200)).iter().any(|frame| frame.contains("\"type\":\"ack\"") && frame.contains("\"seq\":1"));
    }
    match cancelled {
        Some(reason) => println!("cancelled: {}", reason),
        None => println!("done delivered: {}", acked),
    }
}
