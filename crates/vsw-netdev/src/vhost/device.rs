//! The protocol side of a port: the virtqueues as the frontend configures them, the
//! guest's memory, and the vhost-user messages that set them up, start and stop them.

use super::*;

/// A virtqueue while the frontend has it running, as the PMD uses it.
pub(super) struct Running {
    pub(super) queue: SplitQueue,
    /// The driver's call eventfd, non-blocking (only eventfds are taken).
    pub(super) call: Option<File>,
    /// The used index when vsw last decided whether to notify (EVENT_IDX compares the
    /// driver's used event with what was added since).
    pub(super) checked_used: u16,
}

impl Running {
    /// Tells the guest about used buffers, if its driver asked to be told: without
    /// EVENT_IDX the avail ring's VRING_AVAIL_F_NO_INTERRUPT flag, with it the used
    /// event index, both read from guest memory every time (the driver may change
    /// its mind at any moment). Records in `wants` whether the driver waits for
    /// interrupts; returns whether the guest was notified.
    pub(super) fn notify(&mut self, wants: &AtomicBool, notified: &AtomicU64) -> bool {
        // The used entries must be visible before the driver's wishes are read.
        fence(Ordering::SeqCst);
        let new = self.queue.next_used();
        let old = std::mem::replace(&mut self.checked_used, new);
        let rings = self.queue.rings();
        // `waits`: the driver waits for an interrupt (it polls otherwise);
        // `asked`: this batch is the one it asked to be told of.
        let (waits, asked) = if self.queue.event_idx() {
            // A driver that waits sets used_event at or past what it has seen; one
            // that polls leaves it behind.
            let event = rings.used_event();
            (
                event.wrapping_sub(old) < 0x8000,
                new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old),
            )
        } else {
            let waits = rings.avail_flags() & VRING_AVAIL_F_NO_INTERRUPT == 0;
            (waits, waits)
        };
        // A driver that gave no call eventfd cannot be interrupted: it polls.
        wants.store(waits && self.call.is_some(), Ordering::Relaxed);
        if !asked {
            return false;
        }
        if let Some(call) = &mut self.call {
            // Non-blocking: a full counter (EAGAIN) means the guest has been told.
            let _ = call.write(&1u64.to_ne_bytes());
            notified.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// One virtqueue: running or not. The PMD takes the lock once per batch; the
/// protocol thread only to start or stop it.
pub(super) struct Vring {
    pub(super) running: Mutex<Option<Running>>,
    /// Whether the guest's driver asked to be notified the last time vsw looked
    /// (it starts as "yes": a driver that polls says so in the ring).
    pub(super) wants_interrupts: AtomicBool,
}

impl Default for Vring {
    fn default() -> Self {
        Vring {
            running: Mutex::new(None),
            wants_interrupts: AtomicBool::new(true),
        }
    }
}

impl Vring {
    pub(super) fn lock(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the frontend configured for one virtqueue.
#[derive(Default)]
pub(super) struct VringConfig {
    pub(super) size: u16,
    pub(super) desc: u64,
    pub(super) avail: u64,
    pub(super) used: u64,
    pub(super) base: u16,
    pub(super) call: Option<File>,
    pub(super) kicked: bool,
    /// What SET_VRING_ENABLE said last, if it said anything.
    pub(super) enabled: Option<bool>,
}

/// The protocol side of one port.
pub(super) struct Device {
    pub(super) regions: Vec<VhostUserMemoryRegion>,
    /// The guest's memory as the queues address it (one per memory table).
    pub(super) map: Option<Arc<GuestMap>>,
    pub(super) features: u64,
    pub(super) protocol: bool,
    pub(super) config: Vec<VringConfig>,
    pub(super) vrings: Vec<Arc<Vring>>,
    pub(super) status: Arc<GuestStatus>,
}

pub(super) fn invalid(why: &'static str) -> VuError {
    VuError::InvalidOperation(why)
}

impl Device {
    /// A frontend address (its own virtual address space) in guest-physical terms.
    pub(super) fn to_guest(&self, va: u64) -> Option<u64> {
        self.regions.iter().find_map(|r| {
            (va >= r.user_addr && va - r.user_addr < r.memory_size)
                .then(|| va - r.user_addr + r.guest_phys_addr)
        })
    }

    /// Starts queue `i` if the frontend has given it everything it needs.
    pub(super) fn maybe_start(&mut self, i: usize) {
        let c = &self.config[i];
        // QEMU enables the first queue pair before it sets the features, and the
        // protocol handler refuses SET_VRING_ENABLE until they are set: that pair
        // runs once kicked unless the frontend disables it later.
        let enabled = c.enabled.unwrap_or(i < 2);
        if !c.kicked || (self.protocol && !enabled) {
            return;
        }
        let Some(map) = self.map.clone() else {
            return;
        };
        let event_idx = self.features & VIRTIO_RING_F_EVENT_IDX != 0;
        let started = SplitRings::new(map, c.size, c.desc, c.avail, c.used)
            .map(|rings| SplitQueue::new(rings, c.base, event_idx));
        match started {
            Some(queue) => {
                let call = c.call.as_ref().and_then(|f| f.try_clone().ok());
                *self.vrings[i].lock() = Some(Running {
                    queue,
                    call,
                    checked_used: c.base,
                });
                if i.is_multiple_of(2) {
                    self.vrings[i]
                        .wants_interrupts
                        .store(true, Ordering::Relaxed);
                    self.status.set_rx_mode(i / 2, RxMode::WantsInterrupts);
                }
                self.update_link();
            }
            None => {
                self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(queue = i, "vhost-user: queue refused (size or addresses)");
            }
        }
    }

    /// Stops queue `i`; returns where the guest's driver is to go on from.
    pub(super) fn stop(&mut self, i: usize) -> u16 {
        let was = self.vrings[i].lock().take();
        let base = was.map_or(self.config[i].base, |r| r.queue.next_avail());
        self.config[i].base = base;
        self.config[i].kicked = false;
        if i.is_multiple_of(2) {
            self.status.set_rx_mode(i / 2, RxMode::Stopped);
        }
        self.update_link();
        base
    }

    /// The link is up while the first queue pair runs.
    pub(super) fn update_link(&self) {
        let up = self.vrings[0].lock().is_some() && self.vrings[1].lock().is_some();
        let was = self.status.link_up.swap(up, Ordering::Relaxed);
        if was != up {
            tracing::info!(up, "vhost-user link");
        }
    }

    /// The frontend went away: everything stops and is forgotten.
    pub(super) fn reset(&mut self) {
        for i in 0..QUEUES {
            self.stop(i);
            self.config[i] = VringConfig::default();
        }
        self.status
            .retire_memory(self.map.take().map(|m| m.memory().clone()));
        self.regions.clear();
        self.features = 0;
        self.status.features.store(0, Ordering::Relaxed);
        self.protocol = false;
    }

    pub(super) fn queue(&self, index: u32) -> VuResult<usize> {
        let i = index as usize;
        if i < QUEUES {
            Ok(i)
        } else {
            tracing::warn!(index, "vhost-user: no such queue");
            Err(VuError::InvalidParam)
        }
    }
}

impl VhostUserBackendReqHandlerMut for Device {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(OFFERED)
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !OFFERED != 0 {
            tracing::warn!(features, "vhost-user: features not offered");
            return Err(VuError::InvalidParam);
        }
        self.features = features;
        self.status.features.store(features, Ordering::Relaxed);
        self.protocol = features & VHOST_USER_F_PROTOCOL_FEATURES != 0;
        Ok(())
    }

    fn set_mem_table(&mut self, ctx: &[VhostUserMemoryRegion], files: Vec<File>) -> VuResult<()> {
        if ctx.len() != files.len() || ctx.is_empty() {
            return Err(VuError::InvalidParam);
        }
        let ranges: Vec<(GuestAddress, usize, Option<FileOffset>)> = ctx
            .iter()
            .zip(files)
            .map(|(r, f)| {
                (
                    GuestAddress(r.guest_phys_addr),
                    r.memory_size as usize,
                    Some(FileOffset::new(f, r.mmap_offset)),
                )
            })
            .collect();
        let mem = GuestMemoryMmap::from_ranges_with_files(ranges)
            .map_err(|_| invalid("guest memory regions cannot be mapped"))?;
        let mem = GuardedMemory::guard(mem).map_err(invalid)?;
        let map = GuestMap::new(mem.clone()).ok_or(invalid("too many guest memory regions"))?;
        // A new table on a running connection (memory hot-plug): the queues that
        // run stop (no PMD touches the old mapping once its lock is let go), and start
        // again from where they were, on the new memory. Their rings are at guest
        // physical addresses, which the new table still maps.
        let running: Vec<usize> = (0..QUEUES)
            .filter(|&i| self.vrings[i].lock().is_some())
            .collect();
        for i in 0..QUEUES {
            self.stop(i);
        }
        self.status
            .retire_memory(self.map.take().map(|m| m.memory().clone()));
        *self.status.memory.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&mem);
        self.map = Some(Arc::new(map));
        self.regions = ctx.to_vec();
        for i in running {
            self.config[i].kicked = true;
            self.maybe_start(i);
        }
        Ok(())
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        let i = self.queue(index)?;
        if num == 0 || num > u32::from(QUEUE_MAX) || !num.is_power_of_two() {
            self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
            return Err(VuError::InvalidParam);
        }
        self.config[i].size = num as u16;
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        let i = self.queue(index)?;
        let (Some(d), Some(u), Some(a)) = (
            self.to_guest(descriptor),
            self.to_guest(used),
            self.to_guest(available),
        ) else {
            self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
            return Err(VuError::InvalidParam);
        };
        let c = &mut self.config[i];
        (c.desc, c.used, c.avail) = (d, u, a);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        let i = self.queue(index)?;
        self.config[i].base = base as u16;
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        let i = self.queue(index)?;
        Ok(VhostUserVringState::new(index, u32::from(self.stop(i))))
    }

    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        // The PMD polls: kicks are not waited for.
        let i = self.queue(u32::from(index))?;
        self.config[i].kicked = true;
        self.maybe_start(i);
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let i = self.queue(u32::from(index))?;
        // Anything but an eventfd (a pipe, a FUSE file) could block the PMD that
        // writes it: refused. The eventfd is written without blocking.
        let fd = match fd {
            Some(f) if crate::sys::is_eventfd(&f) => {
                crate::sys::set_nonblocking(&f).map_err(VuError::ReqHandlerError)?;
                Some(f)
            }
            Some(_) => {
                self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    queue = i,
                    "vhost-user: a call descriptor that is not an eventfd, refused"
                );
                return Err(VuError::InvalidParam);
            }
            None => None,
        };
        self.config[i].call = fd;
        if let Some(r) = self.vrings[i].lock().as_mut() {
            r.call = self.config[i]
                .call
                .as_ref()
                .and_then(|f| f.try_clone().ok());
        }
        Ok(())
    }

    fn set_vring_err(&mut self, _index: u8, _fd: Option<File>) -> VuResult<()> {
        Ok(())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        // Several queue pairs, and replies to messages that ask for one (the
        // protocol handler sends them).
        Ok(VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK)
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        let offered = VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK;
        if features & !offered.bits() != 0 {
            tracing::warn!(features, "vhost-user: protocol features not offered");
            return Err(VuError::InvalidParam);
        }
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(MAX_QUEUE_PAIRS as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        let i = self.queue(index)?;
        self.config[i].enabled = Some(enable);
        if enable {
            self.maybe_start(i);
        } else {
            let base = self.stop(i);
            self.config[i].base = base;
            self.config[i].kicked = true;
        }
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> VuResult<Vec<u8>> {
        Err(invalid("no device configuration space"))
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> VuResult<()> {
        Err(invalid("no device configuration space"))
    }

    fn set_gpu_socket(&mut self, _: GpuBackend) -> VuResult<()> {
        Err(invalid("not a GPU"))
    }

    fn get_shared_object(&mut self, _: VhostUserSharedMsg) -> VuResult<File> {
        Err(invalid("no shared objects"))
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> VuResult<(VhostUserInflight, File)> {
        Err(invalid("no inflight tracking"))
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> VuResult<()> {
        Err(invalid("no inflight tracking"))
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        Err(invalid("no memory slots protocol"))
    }

    fn add_mem_region(&mut self, _: &VhostUserSingleMemoryRegion, _: File) -> VuResult<()> {
        Err(invalid("no memory slots protocol"))
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        Err(invalid("no memory slots protocol"))
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> VuResult<Option<File>> {
        Err(invalid("no migration"))
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        Err(invalid("no migration"))
    }

    fn set_log_base(&mut self, _: &VhostUserLog, _: File) -> VuResult<()> {
        Err(invalid("no dirty logging"))
    }
}
