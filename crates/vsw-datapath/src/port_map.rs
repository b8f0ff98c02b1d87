//! A PMD's transmit queues by port number. Port numbers are sparse — a bridge's
//! LOCAL port is 65534 — so the queues live in a dense list, which every loop
//! iteration walks (sending due batches), and a table from port number to place in
//! it serves the per-packet lookup.

/// No entry for this port number.
const NONE: u32 = u32::MAX;

pub(crate) struct PortMap<T> {
    /// Port number → place in `entries`.
    index: Vec<u32>,
    entries: Vec<(u32, T)>,
}

impl<T> Default for PortMap<T> {
    fn default() -> Self {
        PortMap {
            index: Vec::new(),
            entries: Vec::new(),
        }
    }
}

impl<T> PortMap<T> {
    #[inline]
    pub(crate) fn get_mut(&mut self, port: u32) -> Option<&mut T> {
        let at = *self.index.get(port as usize)?;
        self.entries.get_mut(at as usize).map(|(_, t)| t)
    }

    pub(crate) fn contains(&self, port: u32) -> bool {
        self.index.get(port as usize).is_some_and(|&at| at != NONE)
    }

    /// Adds `value` for `port`, replacing what it had.
    pub(crate) fn insert(&mut self, port: u32, value: T) {
        if let Some(old) = self.get_mut(port) {
            *old = value;
            return;
        }
        let idx = port as usize;
        if self.index.len() <= idx {
            self.index.resize(idx + 1, NONE);
        }
        self.index[idx] = self.entries.len() as u32;
        self.entries.push((port, value));
    }

    /// Takes out every entry `gone` says so of, handing each to `removed`.
    pub(crate) fn remove_where(
        &mut self,
        mut gone: impl FnMut(&T) -> bool,
        mut removed: impl FnMut(T),
    ) {
        let mut i = 0;
        while i < self.entries.len() {
            if !gone(&self.entries[i].1) {
                i += 1;
                continue;
            }
            let (port, value) = self.entries.swap_remove(i);
            self.index[port as usize] = NONE;
            if let Some((moved, _)) = self.entries.get(i) {
                self.index[*moved as usize] = i as u32;
            }
            removed(value);
        }
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(_, t)| t)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().map(|(_, t)| t)
    }

    /// Takes out every entry.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.index.clear();
        self.entries.drain(..).map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_port_numbers_are_found_and_walked_densely() {
        let mut m = PortMap::default();
        for p in [1u32, 65534, 7, 3] {
            m.insert(p, p * 10);
        }
        assert_eq!(m.values().count(), 4);
        assert_eq!(m.get_mut(65534).copied(), Some(655340));
        assert_eq!(m.get_mut(2), None);
        assert_eq!(m.get_mut(70000), None);
        m.insert(7, 71);
        assert_eq!(m.get_mut(7).copied(), Some(71));
        // Taking out entries moves others; every lookup still lands right.
        let mut taken = Vec::new();
        m.remove_where(|v| *v == 10 || *v == 655340, |v| taken.push(v));
        taken.sort();
        assert_eq!(taken, [10, 655340]);
        assert!(!m.contains(1) && !m.contains(65534));
        assert_eq!(m.get_mut(3).copied(), Some(30));
        assert_eq!(m.get_mut(7).copied(), Some(71));
        assert_eq!(m.drain().count(), 2);
        assert!(!m.contains(3));
    }
}
