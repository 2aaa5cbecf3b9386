//! A real Apache Kafka for tests: the broker's jars fetched once with Maven
//! into a cache outside the checkout, KRaft storage formatted in a
//! temporary directory, and one broker — or a cluster of three — started as
//! JVM child processes on free loopback ports (each node broker and
//! controller at once), stopped cleanly, killed with SIGKILL for fault
//! tests, started again, and killed on drop.
//!
//! The mock cluster librdkafka carries proves navd's logic; this proves it
//! against the broker a deployment runs: its group coordinator, its
//! replication and its `min.insync.replicas`.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

/// The Apache Kafka release the tests run; `testkit/kafka/pom.xml` names
/// the same one (checked by a unit test below).
pub const KAFKA_VERSION: &str = "4.1.2";

/// How to install what the broker needs, for error messages.
pub const INSTALL_HINT: &str = "Apache Kafka for the tests needs Java 17+ and Maven \
(its jars are fetched from Maven Central once and cached): \
`sudo apt-get install default-jdk-headless maven` on Debian/Ubuntu.";

/// The pom whose dependencies are the broker's jars.
const POM: &str = include_str!("../kafka/pom.xml");

/// A JVM small enough for three brokers, two test binaries and a compiler
/// on a 2-core machine: a small heap, the serial collector (no GC threads
/// fighting for the cores), C1 only (a test broker lives seconds, not
/// hours: starting fast matters more than peak speed).
const JVM_OPTS: &[&str] = &[
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.log.kafka.request.logger=warn",
];

/// How long a broker may take to answer metadata after its start: a JVM on
/// two cores shared with compilers can take half a minute.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Where the broker's jars are cached: `$XDG_CACHE_HOME/navd/kafka-<version>`,
/// else `~/.cache/navd/kafka-<version>`. Outside any checkout, so a machine
/// that keeps its cache (a CI runner's) fetches them once.
pub fn cache_dir() -> Result<PathBuf> {
    let root = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| anyhow!("neither XDG_CACHE_HOME nor HOME is set"))?;
            PathBuf::from(home).join(".cache")
        }
    };
    Ok(root.join("navd").join(format!("kafka-{KAFKA_VERSION}")))
}

/// The directory of the broker's jars, fetched with Maven when absent.
/// Several test processes may ask at once: an exclusive lock on a file
/// beside the cache makes one of them fetch, and the fetch goes to a
/// staging directory renamed into place, so a run interrupted half way
/// leaves no cache that looks complete.
pub fn jars() -> Result<PathBuf> {
    let dir = cache_dir()?;
    let done = dir.join(".complete");
    if done.exists() {
        return Ok(dir);
    }
    let parent = dir.parent().expect("the cache has a parent").to_path_buf();
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("creating the cache directory {}", parent.display()))?;
    let lock_path = parent.join(format!("kafka-{KAFKA_VERSION}.lock"));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    // SAFETY: flock on a descriptor we own; released when `lock` closes.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        bail!(
            "locking {}: {}",
            lock_path.display(),
            std::io::Error::last_os_error()
        );
    }
    if done.exists() {
        return Ok(dir);
    }
    let staging = parent.join(format!("kafka-{KAFKA_VERSION}.staging"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    let pom = staging.join("pom.xml");
    std::fs::write(&pom, POM)?;
    // Maven's own repository goes beside the jars (not ~/.m2), so the one
    // directory a CI runner keeps holds everything the fetch wrote.
    let repo = parent.join("m2");
    let out = Command::new("mvn")
        .arg("-B")
        .arg("-q")
        .arg("-f")
        .arg(&pom)
        .arg(format!("-Dmaven.repo.local={}", repo.display()))
        .arg("dependency:copy-dependencies")
        .arg(format!(
            "-DoutputDirectory={}",
            staging.join("jars").display()
        ))
        .arg("-DincludeScope=runtime")
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("`mvn` was not found on PATH: cannot fetch Apache Kafka {KAFKA_VERSION}'s jars into {}.\n{INSTALL_HINT}", dir.display())
        }
        Err(e) => return Err(e).context("running mvn"),
    };
    if !out.status.success() {
        bail!(
            "mvn could not fetch Apache Kafka {KAFKA_VERSION}'s jars ({}):\n{}{}",
            out.status,
            tail(&String::from_utf8_lossy(&out.stdout), 30),
            tail(&String::from_utf8_lossy(&out.stderr), 30)
        );
    }
    std::fs::write(staging.join(".complete"), KAFKA_VERSION)?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staging, &dir)
        .with_context(|| format!("moving the jars into {}", dir.display()))?;
    Ok(dir)
}

/// The `java` to run: `$JAVA_HOME/bin/java` when set, else the one on PATH;
/// its absence is an error naming the package to install.
fn java() -> Result<PathBuf> {
    java_in(std::env::var_os("JAVA_HOME"))
}

fn java_in(java_home: Option<std::ffi::OsString>) -> Result<PathBuf> {
    let java = java_home
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join("bin").join("java"))
        .unwrap_or_else(|| PathBuf::from("java"));
    match Command::new(&java)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(java),
        Ok(s) => bail!(
            "`{} -version` failed ({s}).\n{INSTALL_HINT}",
            java.display()
        ),
        Err(e) => bail!("cannot run `{}`: {e}.\n{INSTALL_HINT}", java.display()),
    }
}

/// One node: broker and KRaft controller in one JVM.
#[derive(Debug)]
struct Node {
    id: i32,
    port: u16,
    controller_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn log_path(&self) -> PathBuf {
        self.dir.join("broker.log")
    }
}

/// A running Apache Kafka: one node, or three (replication factor 3,
/// `min.insync.replicas` 2), in a temporary directory removed on drop.
#[derive(Debug)]
pub struct Kafka {
    nodes: Vec<Node>,
    java: PathBuf,
    classpath: String,
    // Dropped last: the nodes are killed before their directories go.
    _dir: tempfile::TempDir,
}

impl Kafka {
    /// One broker (replication factor 1): what the ordinary tests run on.
    pub fn single() -> Result<Kafka> {
        Kafka::start(1)
    }

    /// Three nodes, each broker and controller, topics replicated three
    /// times with `min.insync.replicas=2`: what a fault test kills nodes of.
    pub fn cluster() -> Result<Kafka> {
        Kafka::start(3)
    }

    /// `n` nodes (1 or 3), formatted and started, answering metadata with
    /// every broker registered.
    ///
    /// On Linux each JVM dies with the thread that started it (so a killed
    /// test process leaves none behind): start and [`restart`] from the
    /// thread the test runs on, not from a pool thread that may end first
    /// (`spawn_blocking`).
    ///
    /// [`restart`]: Kafka::restart
    pub fn start(n: usize) -> Result<Kafka> {
        anyhow::ensure!(n == 1 || n == 3, "a test Kafka has 1 or 3 nodes, not {n}");
        let java = java()?;
        let jars = jars()?;
        let classpath = format!("{}/*", jars.join("jars").display());
        let dir = tempfile::Builder::new().prefix("navd-kafka-").tempdir()?;
        let ports = free_ports(2 * n)?;
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node {
                id: i as i32 + 1,
                port: ports[2 * i],
                controller_port: ports[2 * i + 1],
                dir: dir.path().join(format!("node-{}", i + 1)),
                child: None,
            })
            .collect();
        let voters = nodes
            .iter()
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        let rf = n.min(3);
        let min_isr = if n >= 3 { 2 } else { 1 };
        for node in &nodes {
            std::fs::create_dir_all(node.dir.join("data"))?;
            std::fs::write(
                node.dir.join("server.properties"),
                properties(node, &voters, rf, min_isr),
            )?;
        }
        let cluster_id = cluster_id();
        // Formatting is a JVM start per node: in parallel.
        let formats = nodes
            .iter()
            .map(|node| {
                Command::new(&java)
                    .args(JVM_OPTS)
                    .arg("-cp")
                    .arg(&classpath)
                    .arg("kafka.tools.StorageTool")
                    .args(["format", "--ignore-formatted", "-t", &cluster_id, "-c"])
                    .arg(node.dir.join("server.properties"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("running kafka.tools.StorageTool")
            })
            .collect::<Vec<_>>();
        for (node, child) in nodes.iter().zip(formats) {
            let out = child?.wait_with_output()?;
            if !out.status.success() {
                bail!(
                    "formatting node {}'s KRaft storage failed ({}):\n{}{}",
                    node.id,
                    out.status,
                    tail(&String::from_utf8_lossy(&out.stdout), 20),
                    tail(&String::from_utf8_lossy(&out.stderr), 20)
                );
            }
        }
        // The nodes belong to `kafka` before any starts: a failed start
        // of the second kills the first (on drop).
        let mut kafka = Kafka {
            nodes,
            java,
            classpath,
            _dir: dir,
        };
        for i in 0..kafka.nodes.len() {
            let child = kafka.spawn(&kafka.nodes[i])?;
            kafka.nodes[i].child = Some(child);
        }
        let ids: Vec<i32> = kafka.nodes.iter().map(|n| n.id).collect();
        kafka.wait_for_brokers(&ids, START_TIMEOUT)?;
        Ok(kafka)
    }

    fn spawn(&self, node: &Node) -> Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.log_path())?;
        let mut cmd = Command::new(&self.java);
        cmd.args(JVM_OPTS)
            .arg("-cp")
            .arg(&self.classpath)
            .arg("kafka.Kafka")
            .arg(node.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // Drop kills the JVM, but a test process that is itself killed
        // (a timeout, Ctrl-C) runs no Drop: the kernel then kills the JVM
        // with the thread that started it — a test's own thread, which
        // lives as long as the test.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt as _;
            // SAFETY: prctl is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.spawn()
            .with_context(|| format!("starting Kafka node {}", node.id))
    }

    /// `host:port,…` of every node, for `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node ids (1, or 1 to 3).
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Creates `name` with `partitions` partitions, replicated on every
    /// node (at most three), and waits until each partition has a leader
    /// and its whole replica set in sync. A topic that exists is left as is.
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap_servers())
            .create()
            .context("creating an admin client")?;
        let rf = self.nodes.len().min(3) as i32;
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(rf));
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = futures::executor::block_on(admin.create_topics([&topic], &opts))
            .with_context(|| format!("creating topic {name}"))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, e)) => bail!("creating topic {t}: {e}"),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let md = admin
                .inner()
                .fetch_metadata(Some(name), Duration::from_secs(5));
            if let Ok(md) = md {
                let ready = md.topics().iter().any(|t| {
                    t.name() == name
                        && t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions()
                            .iter()
                            .all(|p| p.leader() >= 0 && p.isr().len() == rf as usize)
                });
                if ready {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "topic {name} has no leader or a short in-sync set after 60 s\n{}",
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The node leading `topic`'s `partition` now.
    pub fn leader_of(&self, topic: &str, partition: i32) -> Result<i32> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap_servers())
            .create()?;
        let md = admin
            .inner()
            .fetch_metadata(Some(topic), Duration::from_secs(10))?;
        md.topics()
            .iter()
            .find(|t| t.name() == topic)
            .and_then(|t| t.partitions().iter().find(|p| p.id() == partition))
            .map(|p| p.leader())
            .filter(|&l| l >= 0)
            .ok_or_else(|| anyhow!("{topic}/{partition} has no leader"))
    }

    /// SIGKILL to node `id`: no flush, no controlled shutdown, as a machine
    /// that loses power.
    pub fn kill(&mut self, id: i32) -> Result<()> {
        let node = self.node_mut(id)?;
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        Ok(())
    }

    /// Starts node `id` again on its own storage and ports (after [`kill`]
    /// or [`stop_node`]), and waits until it is registered again.
    ///
    /// [`kill`]: Kafka::kill
    /// [`stop_node`]: Kafka::stop_node
    pub fn restart(&mut self, id: i32) -> Result<()> {
        let i = self.index(id)?;
        anyhow::ensure!(self.nodes[i].child.is_none(), "node {id} is running");
        let child = self.spawn(&self.nodes[i])?;
        self.nodes[i].child = Some(child);
        self.wait_for_brokers(&[id], START_TIMEOUT)
    }

    /// SIGTERM to node `id` (a controlled shutdown: leadership moved away
    /// first), waiting up to 60 s before a SIGKILL.
    pub fn stop_node(&mut self, id: i32) -> Result<()> {
        let node = self.node_mut(id)?;
        let Some(mut c) = node.child.take() else {
            return Ok(());
        };
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if c.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        bail!("Kafka node {id} did not stop within 60 s of SIGTERM (killed)")
    }

    /// Stops every node cleanly: SIGTERM to all at once (as
    /// `kafka-server-stop.sh` does: one by one, the last nodes of a cluster
    /// would wait for a controller quorum that has already gone), then
    /// waits up to 60 s (a cluster: 120 s) before a SIGKILL. Three nodes
    /// shutting down together on two busy cores once took over a minute
    /// to agree that they all are.
    pub fn stop(&mut self) -> Result<()> {
        for node in &self.nodes {
            if let Some(c) = &node.child {
                // SAFETY: a signal to our own child.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            }
        }
        let within = Duration::from_secs(if self.nodes.len() > 1 { 120 } else { 60 });
        let deadline = Instant::now() + within;
        let mut stuck = Vec::new();
        for node in &mut self.nodes {
            let Some(mut c) = node.child.take() else {
                continue;
            };
            loop {
                if c.try_wait()?.is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    stuck.push(node.id);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        anyhow::ensure!(
            stuck.is_empty(),
            "Kafka nodes {stuck:?} did not stop within {within:?} of SIGTERM (killed)"
        );
        Ok(())
    }

    /// The last lines of every node's log, for a failure's message.
    pub fn log_tails(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                format!(
                    "--- Kafka node {} ({}), last lines of its log:\n{}",
                    n.id,
                    n.log_path().display(),
                    file_tail(&n.log_path(), 40)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn index(&self, id: i32) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .ok_or_else(|| anyhow!("no Kafka node {id}"))
    }

    fn node_mut(&mut self, id: i32) -> Result<&mut Node> {
        let i = self.index(id)?;
        Ok(&mut self.nodes[i])
    }

    /// Waits until the cluster's metadata lists every broker of `ids`
    /// (a broker is listed once registered and unfenced: it serves), failing
    /// early when one of their JVMs exits.
    fn wait_for_brokers(&mut self, ids: &[i32], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        // Asks a node that is running (during a restart the others answer).
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap_servers())
            .create()
            .context("creating an admin client")?;
        loop {
            let mut exited = None;
            for node in &mut self.nodes {
                if !ids.contains(&node.id) {
                    continue;
                }
                if let Some(c) = node.child.as_mut() {
                    if let Some(status) = c.try_wait()? {
                        node.child = None;
                        exited = Some((node.id, status));
                    }
                }
            }
            if let Some((id, status)) = exited {
                bail!(
                    "Kafka node {id} exited while starting ({status})\n{}",
                    self.log_tails()
                );
            }
            // A killed node stays in the metadata until its session
            // expires: its own listener answering tells a restart apart.
            let listening = self.nodes.iter().filter(|n| ids.contains(&n.id)).all(|n| {
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], n.port));
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
            });
            if listening {
                if let Ok(md) = admin.inner().fetch_metadata(None, Duration::from_secs(2)) {
                    let up: Vec<i32> = md.brokers().iter().map(|b| b.id()).collect();
                    if ids.iter().all(|id| up.contains(id)) {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "Apache Kafka did not answer metadata with brokers {ids:?} within {} s\n{}",
                    timeout.as_secs(),
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut c) = node.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A node's configuration. Topics are created by the tests with the admin
/// client, as an operator would: auto-creation is off, so a topic navd
/// needs and nobody made is an error, not a silent one-partition topic.
fn properties(node: &Node, voters: &str, rf: usize, min_isr: usize) -> String {
    format!(
        "process.roles=broker,controller
node.id={id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data}
auto.create.topics.enable=false
default.replication.factor={rf}
min.insync.replicas={min_isr}
offsets.topic.replication.factor={rf}
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={min_isr}
# Few internal partitions and threads: a test broker, two cores.
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
# A consumer group forms at once instead of after 3 s of waiting for more.
group.initial.rebalance.delay.ms=0
# A replica that stops fetching leaves the in-sync set in 10 s, not 30,
# and a killed node is fenced (its partitions led elsewhere) after 3 s,
# not 9: a fault test's outage is short, as a real one would be noticed.
replica.lag.time.max.ms=10000
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
",
        id = node.id,
        port = node.port,
        cport = node.controller_port,
        data = node.dir.join("data").display(),
    )
}

/// `n` distinct free loopback ports: all bound at once (so none repeats),
/// then released for the brokers to take.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// A fresh cluster id. Like Kafka's own `Uuid.randomUuid`, never one that
/// starts with `-`: the storage tool's argument parser would take it for an
/// option (`-t -Xy…`: "expected one argument"), one start in 64.
fn cluster_id() -> String {
    loop {
        let id = kafka_uuid(uuid::Uuid::new_v4());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// A UUID as Kafka writes a cluster id: URL-safe base64 without padding.
fn kafka_uuid(u: uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = u.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((v >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    let mut out = all[all.len().saturating_sub(lines)..].join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The last `lines` lines of a file (of its last 64 KiB).
fn file_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return "(no log)".into();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    tail(&String::from_utf8_lossy(&buf), lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pom_names_the_pinned_version() {
        assert!(
            POM.contains(&format!("<version>{KAFKA_VERSION}</version>")),
            "testkit/kafka/pom.xml and KAFKA_VERSION name the same release"
        );
    }

    #[test]
    fn a_missing_java_names_the_packages_to_install() {
        let e = java_in(Some("/nonexistent/jdk".into())).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("apt-get install default-jdk-headless maven"),
            "{msg}"
        );
    }

    #[test]
    fn cluster_ids_are_kafkas_base64() {
        let u = uuid::Uuid::from_bytes([0xff; 16]);
        assert_eq!(kafka_uuid(u), "_____________________w");
        let z = uuid::Uuid::from_bytes([0; 16]);
        assert_eq!(kafka_uuid(z), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(kafka_uuid(uuid::Uuid::new_v4()).len(), 22);
        // 0xf8 starts with six 1-bits, 62 → `-` in the first place.
        assert!(kafka_uuid(uuid::Uuid::from_bytes([0xf8; 16])).starts_with('-'));
        for _ in 0..2000 {
            assert!(!cluster_id().starts_with('-'));
        }
    }
}
