//! nginx in front of several identical Routers.

use crate::launch::{Component, LaunchProcess, ProcessKind, RUN_DIR};
use crate::ports::PortBlock;
use crate::recipe::Nginx;
use std::collections::BTreeMap;

/// Address of the nginx resource.
pub(crate) const ADDRESS: &str = "nginx";

/// nginx as a component: a configuration change is a reload, and it needs its temp
/// directories (the `*_temp_path`s of [`config`]) under the run directory.
pub(crate) static NGINX: Component = Component {
    name: "nginx",
    install_hint: Some(
        "install nginx (Debian: `apt-get install nginx`, or `scripts/install-deps.sh nginx`); \
         with `frontend.num_additional_frontends: 0` one Router serves without it",
    ),
    reloads_files: true,
    scratch_dirs: &[
        "nginx-tmp/body",
        "nginx-tmp/proxy",
        "nginx-tmp/fastcgi",
        "nginx-tmp/uwsgi",
        "nginx-tmp/scgi",
    ],
};

/// The nginx configuration for `upstreams` (`ip:port`), listening on `port`, with the
/// recipe's limits (`frontend.nginx`). Settings follow what long-lived LLM streams need:
/// no buffering, long read and keepalive timeouts, a 45m body limit, idle connections to
/// the Routers kept open (upstream keepalive over HTTP/1.1), and room for many
/// concurrent streams (`worker_processes auto`, 65535 connections per worker and an
/// open-file limit for two descriptors per proxied request).
///
/// Routers are replaced one at a time while nginx keeps running: a request that meets a
/// Router that is stopped (connection refused) or not routing yet (503: it has no
/// worker) goes to the next Router (`proxy_next_upstream`, also for POST: a completion
/// that no Router ran is safe to send again), and `max_fails=0` keeps nginx from setting
/// a Router aside for `fail_timeout` after it comes back.
///
/// With a session header (`frontend.nginx.session_header`, srtctl's session affinity),
/// nginx hashes it consistently to choose the Router, so one session's requests reach
/// one Router while it is up (and the Routers' prefix caches see them together); a
/// request without the header hashes its own request id, so it is spread.
///
/// Every path in it is under [`RUN_DIR`], which the executor binds to an absolute
/// directory: nginx resolves a relative path against its own prefix, not against the
/// directory srt runs in.
pub(crate) fn config(port: u16, upstreams: &[String], limits: &Nginx) -> String {
    let servers: String = upstreams
        .iter()
        .map(|u| format!("        server {u} max_fails=0;\n"))
        .collect();
    let processes = limits
        .worker_processes
        .map_or_else(|| "auto".to_string(), |n| n.to_string());
    let keepalive = match limits.upstream_keepalive {
        0 => String::new(),
        n => format!("        keepalive {n};\n"),
    };
    let (session_map, session_hash) = match &limits.session_header {
        Some(header) => session(header),
        None => (String::new(), String::new()),
    };
    let Nginx {
        worker_connections,
        worker_rlimit_nofile,
        keepalive_timeout_secs,
        client_max_body_size,
        ..
    } = limits;
    format!(
        "worker_processes {processes};
worker_rlimit_nofile {worker_rlimit_nofile};
pid {RUN_DIR}/nginx.pid;
error_log stderr;
events {{
    worker_connections {worker_connections};
}}
http {{
    access_log off;
    client_body_temp_path {RUN_DIR}/nginx-tmp/body;
    proxy_temp_path {RUN_DIR}/nginx-tmp/proxy;
    fastcgi_temp_path {RUN_DIR}/nginx-tmp/fastcgi;
    uwsgi_temp_path {RUN_DIR}/nginx-tmp/uwsgi;
    scgi_temp_path {RUN_DIR}/nginx-tmp/scgi;
    client_max_body_size {client_max_body_size};
    keepalive_timeout {keepalive_timeout_secs}s;
    proxy_read_timeout 24h;
    proxy_send_timeout 24h;
    proxy_buffering off;
{session_map}    upstream routers {{
{session_hash}{servers}{keepalive}    }}
    server {{
        listen {port};
        location / {{
            proxy_pass http://routers;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
        }}
    }}
}}
"
    )
}

/// The `map` of the request's session key (the header, else the request id) and the
/// upstream's `hash` of it. `header` is letters, digits and `-` (the loader's check),
/// so it names nginx's `$http_` variable as it is.
fn session(header: &str) -> (String, String) {
    let var = format!("$http_{}", header.to_ascii_lowercase().replace('-', "_"));
    (
        format!(
            "    map {var} $srt_session {{\n        default {var};\n        \"\" $request_id;\n    }}\n"
        ),
        "        hash $srt_session consistent;\n".to_string(),
    )
}

/// The nginx process on `node`, proxying to the Routers at `upstreams`, with the
/// recipe's limits. It depends on no Router: it starts alongside them (nginx answers 502
/// for an upstream that is not up yet, and the readiness gates probe the Routers
/// directly), and a Router replaced behind it does not restart it. A changed set of
/// Routers (or limits) changes only its configuration, which apply reloads in place.
pub(crate) fn process(
    node: usize,
    port: u16,
    upstreams: &[String],
    limits: &Nginx,
) -> LaunchProcess {
    let conf_path = format!("{RUN_DIR}/nginx.conf");
    let mut files = BTreeMap::new();
    files.insert(conf_path.clone(), config(port, upstreams, limits));
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
        kind: ProcessKind::Component(&NGINX),
        node,
        devices: Vec::new(),
        ports,
        env: BTreeMap::new(),
        env_unset: Vec::new(),
        argv: [
            "nginx",
            "-e",
            "stderr",
            "-c",
            &conf_path,
            "-g",
            "daemon off;",
        ]
        .into(),
        files,
        depends_on: Vec::new(),
        watches: Default::default(),
        worker: None,
        wrap: Default::default(),
        ranks: None,
        container_image: limits.image.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstreams() -> Vec<String> {
        vec!["<node1-ip>:8180".into(), "<node2-ip>:8180".into()]
    }

    /// srtctl's serving limits by default, and every file under the run directory.
    #[test]
    fn defaults_fit_serving_and_paths_are_under_the_run_dir() {
        let text = config(8000, &upstreams(), &Nginx::default());
        for line in [
            "worker_processes auto;",
            "worker_rlimit_nofile 131070;",
            "worker_connections 65535;",
            "keepalive 512;",
            "server <node1-ip>:8180 max_fails=0;",
            "client_max_body_size 45m;",
            "keepalive_timeout 600s;",
            "proxy_http_version 1.1;",
            "listen 8000;",
        ] {
            assert!(text.contains(line), "no `{line}` in\n{text}");
        }
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [directive, path] = words.as_slice() {
                if directive.ends_with("_path") || *directive == "pid" {
                    assert!(path.starts_with(RUN_DIR), "{line}");
                }
            }
        }
        let p = process(0, 8000, &upstreams(), &Nginx::default());
        assert_eq!(&p.argv[3], "-c");
        assert!(p.argv[4].starts_with(RUN_DIR));
        assert!(p.files.contains_key(&p.argv[4]));
    }

    #[test]
    fn limits_come_from_the_recipe() {
        let limits = Nginx {
            worker_processes: Some(4),
            worker_connections: 1024,
            worker_rlimit_nofile: 4096,
            upstream_keepalive: 0,
            keepalive_timeout_secs: 75,
            client_max_body_size: "1g".into(),
            ..Nginx::default()
        };
        let text = config(8000, &upstreams(), &limits);
        for line in [
            "worker_processes 4;",
            "worker_rlimit_nofile 4096;",
            "worker_connections 1024;",
            "keepalive_timeout 75s;",
            "client_max_body_size 1g;",
        ] {
            assert!(text.contains(line), "no `{line}` in\n{text}");
        }
        assert!(!text.contains("keepalive 0"), "{text}");
        assert!(
            !text.contains("hash "),
            "no session affinity unless asked:\n{text}"
        );
    }

    /// A session header is hashed consistently to a Router; a request without it hashes
    /// its own id.
    #[test]
    fn a_session_header_pins_a_session_to_a_router() {
        let limits = Nginx {
            session_header: Some("X-Correlation-ID".into()),
            ..Nginx::default()
        };
        let text = config(8000, &upstreams(), &limits);
        let map = "    map $http_x_correlation_id $srt_session {\n        default $http_x_correlation_id;\n        \"\" $request_id;\n    }\n";
        assert!(text.contains(map), "{text}");
        let upstream = text.split("upstream routers {").nth(1).unwrap();
        assert!(
            upstream
                .trim_start()
                .starts_with("hash $srt_session consistent;"),
            "{text}"
        );
    }
}
