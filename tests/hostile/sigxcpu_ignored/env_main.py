"""Hostile env: step ignores SIGXCPU, then burns CPU until the hard CPU limit kills it. Expected:
crash (SIGKILL).
"""
import signal

from pipeline.runtime import SkinEnv


class SigxcpuIgnored(SkinEnv):
    def transition(self, action):
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        total = 0
        while True:
            total = (total * 31 + 7) % 1000003

    def reward(self, action):
        return 0.0, [], {}
