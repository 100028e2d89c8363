//! INFO: the text of each section, from the server's state, in Redis
//! 7.0.15's order and with its fields.

use bytes::Bytes;

use super::Ctx;
use crate::protocol::Reply;
use crate::REDIS_VERSION;

pub(super) fn info(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let text = info_text(ctx, &sections);
    Reply::Verbatim(*b"txt", Bytes::from(text))
}

/// When a section of [`SECTIONS`] is printed.
#[derive(Clone, Copy)]
enum Shown {
    /// By name, and with the default sections (INFO with no argument,
    /// `default`, `all`, `everything`).
    Default,
    /// By name, `all` or `everything` only (Redis's commandstats and
    /// latencystats).
    Asked,
    /// By name, or with the default sections while the server's state says
    /// so (coordis's faults: while a fault rule is set).
    While(fn(&crate::state::ServerState) -> bool),
}

/// One INFO section: its name (as asked for, lower case), when it is
/// printed, and what writes its text (its `# Title` line first).
struct Section {
    name: &'static str,
    shown: Shown,
    text: fn(&mut Ctx) -> String,
}

/// INFO's sections, in Redis 7.0.15's order (and coordis's faults last).
static SECTIONS: &[Section] = &[
    Section {
        name: "server",
        shown: Shown::Default,
        text: server,
    },
    Section {
        name: "clients",
        shown: Shown::Default,
        text: clients,
    },
    Section {
        name: "memory",
        shown: Shown::Default,
        text: memory_section,
    },
    Section {
        name: "persistence",
        shown: Shown::Default,
        text: persistence,
    },
    Section {
        name: "stats",
        shown: Shown::Default,
        text: stats,
    },
    Section {
        name: "replication",
        shown: Shown::Default,
        text: replication,
    },
    Section {
        name: "cpu",
        shown: Shown::Default,
        text: cpu,
    },
    Section {
        name: "modules",
        shown: Shown::Default,
        text: |_| "# Modules\r\n".to_string(),
    },
    Section {
        name: "commandstats",
        shown: Shown::Asked,
        text: |ctx| ctx.server.observe.commandstats(),
    },
    Section {
        name: "errorstats",
        shown: Shown::Default,
        text: |ctx| ctx.server.observe.errorstats(),
    },
    Section {
        name: "latencystats",
        shown: Shown::Asked,
        text: |ctx| ctx.server.observe.latencystats(&ctx.server.config),
    },
    Section {
        name: "cluster",
        shown: Shown::Default,
        text: cluster,
    },
    Section {
        name: "keyspace",
        shown: Shown::Default,
        text: keyspace,
    },
    Section {
        name: "faults",
        shown: Shown::While(|s| s.faults.any()),
        text: faults,
    },
];

/// The text of INFO for the requested sections (lower case; none,
/// `default`, `all` or `everything` mean every default section), each
/// once, in [`SECTIONS`]' order.
pub(crate) fn info_text(ctx: &mut Ctx, sections: &[String]) -> String {
    let asked = |word: &str| sections.iter().any(|s| s == word);
    let everything = asked("all") || asked("everything");
    let defaults = sections.is_empty() || everything || asked("default");
    let mut parts: Vec<String> = vec![];
    for section in SECTIONS {
        let shown = asked(section.name)
            || match section.shown {
                Shown::Default => defaults,
                Shown::Asked => everything,
                Shown::While(holds) => defaults && holds(ctx.server),
            };
        if shown {
            parts.push((section.text)(ctx));
        }
    }
    parts.join("\r\n")
}

/// INFO `server`.
fn server(ctx: &mut Ctx) -> String {
    let now = ctx.now;
    let s = &*ctx.server;
    let uptime = now.saturating_sub(s.started_ms) / 1000;
    format!(
        "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:{}\r\nos:{}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:tokio\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\n{}coordis_version:{}\r\n",
        REDIS_VERSION,
        if s.cluster.is_some() { "cluster" } else { "standalone" },
        crate::process::os_name(),
        std::process::id(),
        crate::supervised::info_name(),
        s.run_id,
        s.port,
        s.clock.now_us(),
        uptime,
        uptime / 86400,
        s.hz(),
        s.config.hz,
        // Redis's LRU clock: seconds, 24 bits wide.
        (now / 1000) & 0xFF_FFFF,
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        s.config.config_file,
        // While a shutdown waits for replicas (Redis's conditional line).
        s.shutdown_pending
            .as_ref()
            .map(|p| format!("shutdown_in_milliseconds:{}\r\n", p.remaining_ms()))
            .unwrap_or_default(),
        env!("CARGO_PKG_VERSION"),
    )
}

/// INFO `clients`.
fn clients(ctx: &mut Ctx) -> String {
    let s = &*ctx.server;
    format!(
        "# Clients\r\nconnected_clients:{}\r\ncluster_connections:{}\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n",
        // The primary's client counts while its link streams, as in Redis.
        s.clients.len() + usize::from(s.replica.listed_client().is_some()),
        // Redis's count: two links (in and out) per other known node.
        s.cluster.as_ref().map_or(0, |c| c.nodes.len().saturating_sub(1) * 2),
        s.config.maxclients,
        s.client_peaks.max().0,
        s.client_peaks.max().1,
        s.blocking.blocked(),
        s.tracking.client_count(),
        s.blocking.with_timeout()
    )
}

/// INFO `persistence`.
fn persistence(ctx: &mut Ctx) -> String {
    let s = &*ctx.server;
    // A background save runs while its snapshot is walked (see
    // persist::snapshot); the last save is the last successful one or
    // the start (as LASTSAVE says), the changes since are the dirty
    // counter's rise since then. The append-only file's fields are its
    // own. While the file at start loads, Redis adds its progress.
    let (loading, async_loading, loading_lines) = s.shared.loading.info(ctx.now / 1000);
    format!(
        "# Persistence\r\nloading:{}\r\nasync_loading:{}\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:{}\r\ncurrent_save_keys_total:{}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\n{}{}",
        loading,
        async_loading,
        if s.bgsave.in_progress { s.bgsave.keys_processed.load(std::sync::atomic::Ordering::Relaxed) } else { 0 },
        s.bgsave.keys_total,
        s.dirty - s.dirty_at_save,
        u8::from(s.bgsave.in_progress),
        s.last_save_secs,
        if s.saves.last_bgsave_ok { "ok" } else { "err" },
        s.bgsave.last_secs,
        s.bgsave.current_secs(),
        s.saves.rdb_saves,
        s.saves.last_load_keys_expired,
        s.saves.last_load_keys_loaded,
        crate::persist::aof::info(s),
        loading_lines
    )
}

/// INFO `stats`.
fn stats(ctx: &mut Ctx) -> String {
    let migrate_sockets = ctx.server.migrate_sockets.count(ctx.now / 1000);
    let s = &*ctx.server;
    let expired: u64 = ctx.dbs.iter().map(|d| d.expired_count).sum();
    let evicted = s.evictor.evicted_keys;
    let evicted_clients = s.evicted_clients;
    let st = &s.stats;
    let rates = s.rates.per_second();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    format!(
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\nexpired_keys:{}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:{}\r\nexpire_cycle_cpu_milliseconds:{}\r\nevicted_keys:{evicted}\r\nevicted_clients:{evicted_clients}\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:{migrate_sockets}\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:{}\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\n",
        st.total_connections_received,
        st.total_commands_processed,
        rates[0].round() as u64,
        load(&s.shared.net_input_bytes),
        load(&s.shared.net_output_bytes),
        rates[1] / 1024.0,
        rates[2] / 1024.0,
        st.rejected_connections + load(&s.shared.rejected),
        s.repl.sync_full,
        s.repl.sync_partial_ok,
        s.repl.sync_partial_err,
        expired,
        st.expired_time_cap_reached_count,
        st.expire_cycle_us / 1000,
        st.keyspace_hits,
        st.keyspace_misses,
        s.pubsub.channel_count(),
        s.pubsub.numpat(),
        s.pubsub.shard_channel_count(),
        s.tracking.totals().0,
        s.tracking.totals().1,
        s.tracking.totals().2,
        st.unexpected_error_replies,
        s.observe.total_errors(),
        load(&s.shared.reads_processed),
        load(&s.shared.writes_processed),
    )
}

/// INFO `replication`.
fn replication(ctx: &mut Ctx) -> String {
    let now = ctx.now;
    let s = &*ctx.server;
    // A replica's lines are its link's; the replicas, the history's IDs
    // and offset and the backlog are the primary side's, which a
    // replica keeps on its primary's history.
    let role_lines = if s.replica.is_replica() {
        s.replica.info_lines(&s.config, now)
    } else {
        "role:master\r\n".to_string()
    };
    s.repl.info(&s.config, &role_lines)
}

/// INFO `cpu`.
fn cpu(_ctx: &mut Ctx) -> String {
    let (sys, user) = crate::process::cpu_seconds();
    // coordis forks no children, and its threads share the work, so the
    // main-thread fields give the process's figures.
    format!(
        "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{sys:.6}\r\nused_cpu_user_main_thread:{user:.6}\r\n"
    )
}

/// INFO `cluster`.
fn cluster(ctx: &mut Ctx) -> String {
    let enabled = u8::from(ctx.server.cluster.is_some());
    format!("# Cluster\r\ncluster_enabled:{enabled}\r\n")
}

/// INFO `keyspace`.
fn keyspace(ctx: &mut Ctx) -> String {
    let mut text = String::from("# Keyspace\r\n");
    for (i, db) in ctx.dbs.iter().enumerate() {
        if !db.is_empty() {
            text.push_str(&format!(
                "db{}:keys={},expires={},avg_ttl=0\r\n",
                i,
                db.len(),
                db.expires_len()
            ));
        }
    }
    text
}

/// coordis's own INFO `faults`: the fault rules' counts.
fn faults(ctx: &mut Ctx) -> String {
    let faults = &ctx.server.faults;
    let rules = faults.list();
    let mut text = format!(
        "# Faults\r\nfault_rules:{}\r\nfault_matches:{}\r\nfault_fires:{}\r\n",
        rules.len(),
        rules.iter().map(|r| r.matched).sum::<u64>(),
        rules.iter().map(|r| r.fired).sum::<u64>()
    );
    for r in &rules {
        text.push_str(&format!("rule_{}:matched={},fired={}\r\n", r.id, r.matched, r.fired));
    }
    text
}

/// INFO `memory`, with Redis's fields, from the figures MEMORY STATS reads
/// ([`super::memory::overhead`]). `mem_clients_normal` sums the clients' CLIENT LIST
/// `tot-mem`; the replication buffer is split between
/// `mem_replication_backlog` and `mem_clients_slaves` as Redis splits it.
fn memory_section(ctx: &mut Ctx) -> String {
    // Inside a script the VMs are in use: their sizes as last noted.
    let (lua, lua_functions) = match ctx.scripting.as_ref() {
        Some(vm) => (vm.used_memory() as u64, vm.functions_used_memory() as u64),
        None => {
            let state = &ctx.server.shared.script;
            (
                state.lua_memory.load(std::sync::atomic::Ordering::Relaxed),
                state.functions_memory.load(std::sync::atomic::Ordering::Relaxed),
            )
        }
    };
    let lua_total = lua + lua_functions;
    let (functions, libraries) = ctx.scripting.as_ref().map_or((0, 0), |l| {
        let libraries = l.libraries();
        (libraries.function_count(), libraries.len())
    });
    let m = super::memory::overhead(ctx);
    let (used, peak, startup, rss) = (m.total, m.peak, m.startup, m.rss);
    let (overhead, dataset, scripts) = (m.overhead_total, m.dataset, m.scripts);
    let (scripts_bytes, functions_bytes) = (m.lua_caches, m.functions_caches);
    let system = crate::process::total_system_memory();
    let net = used.saturating_sub(startup).max(1);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let diff = |a: u64, b: u64| a as i64 - b as i64;
    let config = &ctx.server.config;
    let (maxmemory, policy) = (config.maxmemory(), config.maxmemory_policy());
    let scripts_total = scripts_bytes + functions_bytes;
    let not_counted = crate::evict::not_counted(ctx);
    let (lazy_pending, lazy_freed) = (ctx.server.lazyfree.pending(), ctx.server.lazyfree.freed());
    let (clients_normal, clients_slaves) = (m.clients_normal, m.clients_slaves);
    let (repl_backlog, repl_buffers, aof_buffer) = (m.repl_backlog, m.repl_buffers, m.aof_buffer);
    format!(
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:{startup}\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{used}\r\nallocator_active:{}\r\nallocator_resident:{rss}\r\ntotal_system_memory:{system}\r\ntotal_system_memory_human:{}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{scripts_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\nused_memory_vm_functions:{lua_functions}\r\nused_memory_vm_total:{lua_total}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{functions_bytes}\r\nused_memory_scripts:{scripts_total}\r\nused_memory_scripts_human:{}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:0\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:{not_counted}\r\nmem_replication_backlog:{repl_backlog}\r\nmem_total_replication_buffers:{repl_buffers}\r\nmem_clients_slaves:{clients_slaves}\r\nmem_clients_normal:{clients_normal}\r\nmem_cluster_links:0\r\nmem_aof_buffer:{aof_buffer}\r\nmem_allocator:libc\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:{lazy_pending}\r\nlazyfreed_objects:{lazy_freed}\r\n",
        human_bytes(used),
        human_bytes(rss),
        human_bytes(peak),
        ratio(used, peak) * 100.0,
        ratio(dataset, net) * 100.0,
        m.allocator_active,
        human_bytes(system),
        human_bytes(lua),
        human_bytes(lua_total),
        human_bytes(scripts_total),
        human_bytes(maxmemory),
        ratio(m.allocator_active, used),
        diff(m.allocator_active, used),
        ratio(rss, m.allocator_active),
        diff(rss, m.allocator_active),
        // The allocator's resident memory is the process's here.
        1.0,
        ratio(rss, used),
        diff(rss, used),
    )
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.2}G", n as f64 / (1u64 << 30) as f64)
    } else if n >= 1 << 20 {
        format!("{:.2}M", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.2}K", n as f64 / 1024.0)
    } else {
        format!("{n}B")
    }
}
