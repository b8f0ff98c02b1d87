"""A MAC-learning switch for OpenFlow 1.3, as an os-ken controller app (what Ryu's
simple_switch_13 sample does; os-ken no longer ships its samples).

A table-miss flow sends every unknown packet up whole; each packet-in teaches the
controller where its source is and, once the destination is known, installs a
flow for the pair (priority 1: in_port, eth_dst, eth_src) and sends the packet on
with a packet-out.

Usage: python learning_switch_13.py PORT  (listens on 127.0.0.1:PORT; prints
"listening", then "connected DPID" for each switch that connects)."""

import sys

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # datapath id -> {MAC: port}
        self.where = {}

    def add_flow(self, dp, priority, match, actions):
        parser = dp.ofproto_parser
        apply = parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)
        dp.send_msg(
            parser.OFPFlowMod(datapath=dp, priority=priority, match=match, instructions=[apply])
        )

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_me = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
        self.add_flow(dp, 0, parser.OFPMatch(), [to_me])
        print("connected %016x" % dp.id, flush=True)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        if eth is None:
            return
        macs = self.where.setdefault(dp.id, {})
        macs[eth.src] = in_port
        out = macs.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_dst=eth.dst, eth_src=eth.src)
            self.add_flow(dp, 1, match, actions)
        dp.send_msg(
            parser.OFPPacketOut(
                datapath=dp,
                buffer_id=ofp.OFP_NO_BUFFER,
                in_port=in_port,
                actions=actions,
                data=msg.data,
            )
        )


if __name__ == "__main__":
    cfg.CONF(
        args=["--ofp-tcp-listen-port", sys.argv[1], "--ofp-listen-host", "127.0.0.1"],
        project="os_ken",
    )
    print("listening", flush=True)
    app_manager.AppManager.run_apps([__name__])
