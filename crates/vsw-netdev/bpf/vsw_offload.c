// vsw's kernel fast path for offloaded flows.
//
// `vsw_tc_ingress` runs at tc ingress of a port's interface: a frame whose flow is in
// FLOWS is counted (per CPU) and redirected to the output port's interface (or
// dropped) inside the kernel; any other frame goes on as if nothing had looked.
// tc rather than XDP: it works on socket buffers, so super-frames and checksums left
// to the device keep their offload state (XDP redirect forwards a partial checksum as
// it is and breaks TCP from a peer with checksum offload on).
//
// AF_PACKET taps see a frame before tc ingress, so vsw's own socket on the port runs
// `vsw_sock_filter`, which refuses frames of offloaded flows: each frame is forwarded
// once, by the kernel or by vsw.
//
// The key: receive interface, both MAC addresses, IPv4 addresses, protocol (TCP or
// UDP) and ports: an exact entry vsw makes on behalf of a datapath flow whose
// megaflow looks at nothing else. Frames with IP options, fragments or a VLAN tag are
// never offloaded.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct flow_key {
	__u32 ifindex;
	__u32 src;
	__u32 dst;
	__u16 sport;
	__u16 dport;
	__u8 dmac[6];
	__u8 smac[6];
	__u8 proto;
	__u8 pad[3];
};

struct flow_action {
	__u32 out_ifindex;
	__u32 drop;
};

struct flow_count {
	__u64 packets;
	__u64 bytes;
};

// Built twice: as is, and with VSW_PIN_MAPS for `offload-persist`, where the loader
// finds the maps of an earlier run pinned by name in the port's directory on bpffs
// (and uses them, entries and all) or pins new ones there.
#ifdef VSW_PIN_MAPS
#define PINNED __uint(pinning, LIBBPF_PIN_BY_NAME);
#else
#define PINNED
#endif

// Sizes are set by the loader (offload-capacity).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow_key);
	__type(value, struct flow_action);
	PINNED
} FLOWS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow_key);
	__type(value, struct flow_count);
	PINNED
} COUNTS SEC(".maps");

#define ETH_LEN 14
#define IP_LEN 20

// Fills `k` from the headers at `hdr` (Ethernet, IPv4 without options, the first 4
// bytes of TCP/UDP); 0 when the frame can be offloaded at all.
static __always_inline int key_of(const __u8 *hdr, __u32 ifindex, struct flow_key *k)
{
	const struct ethhdr *eth = (const void *)hdr;
	const struct iphdr *ip = (const void *)(hdr + ETH_LEN);
	const __u16 *ports = (const void *)(hdr + ETH_LEN + IP_LEN);

	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
		return -1;
	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
		return -1;
	k->ifindex = ifindex;
	__builtin_memcpy(k->dmac, eth->h_dest, 6);
	__builtin_memcpy(k->smac, eth->h_source, 6);
	k->src = ip->saddr;
	k->dst = ip->daddr;
	k->sport = ports[0];
	k->dport = ports[1];
	k->proto = ip->protocol;
	return 0;
}

SEC("classifier")
int vsw_tc_ingress(struct __sk_buff *skb)
{
	__u8 hdr[ETH_LEN + IP_LEN + 4];
	struct flow_key k = {};

	if (skb->vlan_present)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, 0, hdr, sizeof(hdr)) < 0)
		return TC_ACT_OK;
	if (key_of(hdr, skb->ingress_ifindex, &k) < 0)
		return TC_ACT_OK;
	struct flow_action *a = bpf_map_lookup_elem(&FLOWS, &k);
	if (!a)
		return TC_ACT_OK;
	struct flow_count *c = bpf_map_lookup_elem(&COUNTS, &k);
	if (c) {
		c->packets++;
		c->bytes += skb->len;
	}
	if (a->drop)
		return TC_ACT_SHOT;
	return bpf_redirect(a->out_ifindex, 0);
}

SEC("socket")
int vsw_sock_filter(struct __sk_buff *skb)
{
	__u8 hdr[ETH_LEN + IP_LEN + 4];
	struct flow_key k = {};

	if (skb->vlan_present)
		return skb->len;
	if (bpf_skb_load_bytes(skb, 0, hdr, sizeof(hdr)) < 0)
		return skb->len;
	if (key_of(hdr, skb->ifindex, &k) < 0)
		return skb->len;
	// Offloaded: the kernel forwards it; vsw must not see it too.
	if (bpf_map_lookup_elem(&FLOWS, &k))
		return 0;
	return skb->len;
}

char LICENSE[] SEC("license") = "GPL";
