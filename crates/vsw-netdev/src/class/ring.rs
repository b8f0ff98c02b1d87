//! `ring`: in memory, for measuring the datapath alone (`vsw_datapath::ring`): it
//! replays generated UDP frames and discards what it is sent.

use vsw_datapath::PortQueues;

use super::{
    number, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass,
    PortDevice, PortError, Presence,
};

pub struct Ring;

pub static CLASS: Ring = Ring;

impl PortClass for Ring {
    fn name(&self) -> &'static str {
        "ring"
    }

    fn options(&self) -> &'static [ClassOption] {
        const fn reopen(key: &'static str) -> ClassOption {
            ClassOption {
                key,
                on_change: OnChange::Reopen,
                saved_default: None,
            }
        }
        const OPTIONS: &[ClassOption] = &[
            reopen("ring-flows"),
            reopen("ring-frame-size"),
            reopen("ring-rate"),
        ];
        OPTIONS
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::NotSet
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        _env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let mut d = RingDevice {
            name: port.to_string(),
            flows: 0,
            frame_size: 64,
            rate: 0,
        };
        for (k, v) in options {
            match k.as_str() {
                "ring-flows" => {
                    d.flows = number(k, v, 0..=1_000_000, "a number of flows, 0..1000000")?
                }
                "ring-frame-size" => {
                    d.frame_size = number(k, v, 64..=1518, "a frame size on the wire, 64..1518")?
                }
                "ring-rate" => {
                    d.rate = number(
                        k,
                        v,
                        0..=100_000_000,
                        "frames per second, 0 (unpaced)..100000000",
                    )?
                }
                _ => {}
            }
        }
        Ok(Box::new(d))
    }
}

struct RingDevice {
    name: String,
    /// Distinct UDP flows in the generated frames (0: it generates nothing).
    flows: u32,
    frame_size: usize,
    /// Frames per second it gives (0: unpaced).
    rate: u64,
}

impl PortDevice for RingDevice {
    fn presence(&self) -> Presence {
        Presence::Own
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        Ok(vsw_datapath::ring::paced_ring_port(
            self.flows,
            self.frame_size,
            self.rate,
        ))
    }

    fn mtu(&self) -> Option<u32> {
        None
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        super::mtu_not_set(&self.name, mtu)
    }
}
