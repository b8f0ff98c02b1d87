//! The service manager's side of vswd's life (systemd's `Type=notify`): READY once
//! the switch forwards by its configuration — ports attached and rules restored,
//! from the state file or, with `--ovsdb`, once the database was first carried out
//! — and STOPPING when it shuts down. Nothing when no service manager asked
//! (`NOTIFY_SOCKET` unset).

use std::sync::Once;

use sd_notify::NotifyState;

/// Tells the service manager vswd is up (the first time only), with `status` for
/// `systemctl status`.
pub fn ready(status: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)]) {
            tracing::warn!(error = %e, "cannot tell the service manager vswd is ready");
        }
    });
}

/// Tells the service manager vswd is shutting down.
pub fn stopping() {
    let _ = sd_notify::notify(&[NotifyState::Stopping]);
}
