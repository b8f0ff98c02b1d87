// vsw's way to hand the kernel a UDP-tunnelled super-frame for an underlay
// interface: a packet socket's 10-byte virtio-net header cannot say "UDP tunnel",
// a tap's 24-byte one can (kernel 6.17 on). vsw writes such frames into a tap of
// its own; this classifier, at that tap's tc ingress, redirects every frame to the
// underlay interface's transmit path, where the kernel (or the NIC) cuts it.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

// Set when the program is loaded: the underlay interface.
volatile const __u32 TARGET_IFINDEX = 0;

SEC("classifier")
int vsw_tunnel_gso_redirect(struct __sk_buff *skb)
{
	return bpf_redirect(TARGET_IFINDEX, 0);
}

char LICENSE[] SEC("license") = "GPL";
