//! nginx in front of several identical Routers.

use crate::launch::{LaunchProcess, ProcessKind, RUN_DIR};
use crate::ports::PortBlock;
use std::collections::BTreeMap;

/// Address of the nginx resource.
pub const ADDRESS: &str = "nginx";

/// The nginx configuration for `upstreams` (`ip:port`), listening on `port`.
/// Settings follow what long-lived LLM streams need: no buffering, long read and
/// keepalive timeouts, a 45m body limit.
pub fn config(port: u16, upstreams: &[String]) -> String {
    let servers: String = upstreams
        .iter()
        .map(|u| format!("        server {u};\n"))
        .collect();
    format!(
        "worker_processes 1;
pid {RUN_DIR}/nginx.pid;
error_log stderr;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    client_body_temp_path {RUN_DIR}/nginx-tmp/body;
    proxy_temp_path {RUN_DIR}/nginx-tmp/proxy;
    fastcgi_temp_path {RUN_DIR}/nginx-tmp/fastcgi;
    uwsgi_temp_path {RUN_DIR}/nginx-tmp/uwsgi;
    scgi_temp_path {RUN_DIR}/nginx-tmp/scgi;
    client_max_body_size 45m;
    keepalive_timeout 600s;
    proxy_read_timeout 24h;
    proxy_send_timeout 24h;
    proxy_buffering off;
    upstream routers {{
{servers}        keepalive 512;
    }}
    server {{
        listen {port};
        location / {{
            proxy_pass http://routers;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }}
    }}
}}
"
    )
}

/// The nginx process on `node`, proxying to the Routers at `upstreams`. It watches the
/// Routers (`routers`) rather than waiting for them: nginx answers 502 for an upstream
/// that is not up yet, and the readiness gates probe the Routers directly.
pub fn process(
    node: usize,
    port: u16,
    upstreams: &[String],
    routers: Vec<String>,
) -> LaunchProcess {
    let conf_path = format!("{RUN_DIR}/nginx.conf");
    let mut files = BTreeMap::new();
    files.insert(conf_path.clone(), config(port, upstreams));
    let mut ports = BTreeMap::new();
    ports.insert(
        crate::ports::PUBLIC.to_string(),
        PortBlock {
            base: port,
            count: 1,
        },
    );
    LaunchProcess {
        address: ADDRESS.to_string(),
        kind: ProcessKind::Nginx,
        node,
        devices: Vec::new(),
        ports,
        env: BTreeMap::new(),
        env_unset: Vec::new(),
        argv: vec![
            "nginx".into(),
            "-e".into(),
            "stderr".into(),
            "-c".into(),
            conf_path,
            "-g".into(),
            "daemon off;".into(),
        ],
        files,
        depends_on: Vec::new(),
        watches: routers,
        worker: None,
        container_image: None,
    }
}
