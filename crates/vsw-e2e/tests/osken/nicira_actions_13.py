"""An os-ken controller app for OpenFlow 1.3 that installs flows with Nicira's
extensions, through os-ken's own classes: registers in matches, REG_LOAD2,
REG_MOVE, RESUBMIT_TABLE, DEC_TTL, CONJUNCTION with conj_id, LEARN and NOTE, and
Open vSwitch's NSH fields (experimenter OXMs) in a match and in set-fields.

Usage: python nicira_actions_13.py PORT  (listens on 127.0.0.1:PORT; prints
"listening", then, for a switch that connects, "installed" once a barrier after
the flows is answered, or "error TYPE CODE" for each error the switch sends)."""

import sys

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class NiciraActions13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def add_flow(self, dp, table, priority, match, actions):
        parser = dp.ofproto_parser
        apply = parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)
        dp.send_msg(
            parser.OFPFlowMod(
                datapath=dp, table_id=table, priority=priority, match=match, instructions=[apply]
            )
        )

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dp = ev.msg.datapath
        p = dp.ofproto_parser
        ip = 0x0800
        self.add_flow(
            dp,
            0,
            10,
            p.OFPMatch(eth_type=ip, reg0=1),
            [
                p.NXActionRegLoad2(dst="reg1", value=5),
                p.NXActionRegMove(src_field="reg1", dst_field="reg2", n_bits=32),
                p.NXActionDecTtl(),
                p.NXActionResubmitTable(table_id=3),
            ],
        )
        self.add_flow(
            dp,
            0,
            20,
            p.OFPMatch(eth_type=ip, ipv4_src="198.18.0.1"),
            [p.NXActionConjunction(clause=0, n_clauses=2, id_=7)],
        )
        self.add_flow(
            dp,
            0,
            20,
            p.OFPMatch(eth_type=ip, ip_proto=6, tcp_dst=80),
            [p.NXActionConjunction(clause=1, n_clauses=2, id_=7)],
        )
        self.add_flow(
            dp, 0, 20, p.OFPMatch(eth_type=ip, conj_id=7), [p.OFPActionOutput(1)]
        )
        self.add_flow(
            dp,
            1,
            5,
            p.OFPMatch(),
            [
                p.NXActionLearn(
                    table_id=10,
                    priority=5,
                    specs=[
                        p.NXFlowSpecMatch(src=("eth_src", 0), dst=("eth_dst", 0), n_bits=48),
                        p.NXFlowSpecOutput(src=("in_port", 0), n_bits=16),
                    ],
                ),
                p.NXActionNote(note=[1, 2, 3]),
            ],
        )
        self.add_flow(
            dp,
            2,
            10,
            p.OFPMatch(eth_type=0x894F, nsh_mdtype=1, nsh_spi=0x123, nsh_c1=0xABC),
            [
                p.OFPActionSetField(nsh_si=254),
                p.OFPActionSetField(nsh_c2=7),
                p.OFPActionOutput(1),
            ],
        )
        dp.send_msg(p.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev):
        print("installed", flush=True)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        print("error %d %d" % (ev.msg.type, ev.msg.code), flush=True)


if __name__ == "__main__":
    cfg.CONF(
        args=["--ofp-tcp-listen-port", sys.argv[1], "--ofp-listen-host", "127.0.0.1"],
        project="os_ken",
    )
    print("listening", flush=True)
    app_manager.AppManager.run_apps([__name__])
