//! expect: none
//!
//! Edge device sync agent: pulls commands from the fleet API and applies them to the local
//! SQLite database (rusqlite). The processed-command row and the state change are one SQLite
//! transaction; `INSERT OR IGNORE` on the command id decides whether to apply.

use rusqlite::{params, Connection};

#[derive(serde::Deserialize)]
pub struct FleetCommand {
    pub command_id: String,
    pub kind: String,
    pub setting: String,
    pub value: String,
}

pub struct LocalStore {
    conn: Connection,
}

impl LocalStore {
    pub fn apply(&mut self, cmd: &FleetCommand) -> rusqlite::Result<bool> {
        let tx = self.conn.transaction()?;
        let fresh = tx.execute(
            "INSERT OR IGNORE INTO applied_commands (command_id, applied_at) VALUES (?1, strftime('%s','now'))",
            params![cmd.command_id],
        )?;
        if fresh == 0 {
            tx.rollback()?;
            return Ok(false);
        }
        match cmd.kind.as_str() {
            "set" => {
                tx.execute(
                    "INSERT INTO settings (name, value) VALUES (?1, ?2) \
                     ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    params![cmd.setting, cmd.value],
                )?;
            }
            "append_log_target" => {
                tx.execute(
                    "INSERT INTO log_targets (url) VALUES (?1)",
                    params![cmd.value],
                )?;
            }
            _ => {}
        }
        tx.commit()?;
        Ok(true)
    }
}

pub async fn sync_loop(http: reqwest::Client, api: &str, mut store: LocalStore) -> anyhow::Result<()> {
    loop {
        let cmds: Vec<FleetCommand> = http
            .get(format!("{api}/v1/devices/self/commands"))
            .send()
            .await?
            .json()
            .await?;
        for cmd in &cmds {
            store.apply(cmd)?;
            http.post(format!("{api}/v1/devices/self/commands/{}/ack", cmd.command_id))
                .send()
                .await?;
        }
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    }
}
