//! The measuring tools the README's figures come from still work, on every
//! backend: `tx-bench` (the MULTI/EXEC row of `scripts/bench.sh`) runs
//! exactly the transactions it was asked for and prints its three figures.

use coordis_client_tests::backend::Backend;
use coordis_client_tests::on_every_backend;

on_every_backend!(tx_bench_runs_every_transaction_it_reports, |backend: &Backend| {
    let url = backend.url();
    async move {
        let port = url.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
        // 7 clients, 3 transactions per pipeline, 100 in all: the last
        // pipelines are partial.
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tx-bench"))
            .args([port.as_str(), "7", "3", "100"])
            .output()
            .await
            .expect("run tx-bench");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "tx-bench failed: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let figures: Vec<f64> = stdout
            .split_whitespace()
            .map(|f| f.parse().expect("a number"))
            .collect();
        assert_eq!(figures.len(), 3, "transactions/s p50 p99: {stdout}");
        assert!(figures[0] > 0.0 && figures[1] <= figures[2], "{stdout}");

        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let fence: i64 = redis::cmd("GET").arg("fence").query_async(&mut conn).await.unwrap();
        assert_eq!(fence, 100, "one INCR per transaction");
        let locks: Vec<String> = redis::cmd("KEYS").arg("lock:*").query_async(&mut conn).await.unwrap();
        assert!(!locks.is_empty() && locks.len() <= 100, "{} lock keys", locks.len());
    }
});
