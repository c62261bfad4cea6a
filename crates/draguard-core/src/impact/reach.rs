//! Which devices a DeviceTaintRule reaches. Its selector matches by
//! driver, pool and device name, each only when set, so `{}` reaches every
//! device. A missing selector is where versions differ: up to 1.37.0 the
//! scheduler counted its taint on every device while the eviction
//! controller counted it on none; from 1.37.1 on (kubernetes#141648,
//! #141998) both count it on none. The 1.37 rules are 1.37.1's.

use std::sync::Arc;

use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintSelector;

/// A device by the names a DeviceTaintRule selects on. Shared strings: a
/// cluster repeats a few drivers, one pool per node and a few device names
/// over and over, and the live indexes hold each once
/// ([`crate::interner`]); a clone costs three reference counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Who reads a rule's taint: the scheduler, when it allocates a device,
/// or the eviction controller, for pods that already use one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Scheduler,
    EvictionController,
}

/// Whether a rule with `selector` taints `device` for `reader` in `version`.
pub fn reaches(
    selector: Option<&DeviceTaintSelector>,
    device: &DeviceId,
    version: KubeVersion,
    reader: Reader,
) -> bool {
    match selector {
        None => reader == Reader::Scheduler && version < KubeVersion::V1_37,
        Some(selector) => {
            let fits = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
            fits(&selector.driver, &device.driver)
                && fits(&selector.pool, &device.pool)
                && fits(&selector.device, &device.device)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
        DeviceId {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }

    fn selector(driver: Option<&str>, pool: Option<&str>, device: Option<&str>) -> DeviceTaintSelector {
        DeviceTaintSelector {
            driver: driver.map(Into::into),
            pool: pool.map(Into::into),
            device: device.map(Into::into),
        }
    }

    #[test]
    fn by_driver_pool_and_device() {
        let gpu = id("gpu.example.com", "node-1", "gpu-0");
        let other = id("nic.example.com", "node-1", "nic-0");
        for reader in [Reader::Scheduler, Reader::EvictionController] {
            for version in KubeVersion::SUPPORTED.iter().copied() {
                let by_driver = selector(Some("gpu.example.com"), None, None);
                assert!(reaches(Some(&by_driver), &gpu, version, reader));
                assert!(!reaches(Some(&by_driver), &other, version, reader));
                let by_pool = selector(None, Some("node-1"), None);
                assert!(
                    reaches(Some(&by_pool), &gpu, version, reader) && reaches(Some(&by_pool), &other, version, reader)
                );
                let by_device = selector(Some("gpu.example.com"), Some("node-1"), Some("gpu-1"));
                assert!(!reaches(Some(&by_device), &gpu, version, reader));
                let empty = selector(None, None, None);
                assert!(
                    reaches(Some(&empty), &other, version, reader),
                    "{{}} reaches every device"
                );
            }
        }
    }

    #[test]
    fn a_missing_selector_differs_by_version_and_reader() {
        let gpu = id("gpu.example.com", "node-1", "gpu-0");
        assert!(reaches(None, &gpu, KubeVersion::V1_36, Reader::Scheduler));
        assert!(!reaches(None, &gpu, KubeVersion::V1_36, Reader::EvictionController));
        assert!(!reaches(None, &gpu, KubeVersion::V1_37, Reader::Scheduler));
        assert!(!reaches(None, &gpu, KubeVersion::V1_37, Reader::EvictionController));
    }
}
