"""Generates kvserve_client/_pb/generation_pb2*.py from proto/kvserve/v1/generation.proto at
build time. The proto is staged as kvserve_client/_pb/generation.proto so that the grpc stub's
import of the message module is `from kvserve_client._pb import generation_pb2` as installed,
with no rewriting of generated code. KVSERVE_PROTO overrides where the proto is read from."""
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.environ.get("KVSERVE_PROTO", os.path.join(HERE, "..", "..", "proto", "kvserve", "v1", "generation.proto"))


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        from grpc_tools import protoc  # a build requirement (pyproject.toml)
        import grpc_tools

        if not os.path.isfile(PROTO):
            raise SystemExit(f"kvserve_client: proto not found at {PROTO} (set KVSERVE_PROTO)")
        out_dir = os.path.join(self.build_lib, "kvserve_client", "_pb")
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory() as stage:
            os.makedirs(os.path.join(stage, "kvserve_client", "_pb"))
            shutil.copy(PROTO, os.path.join(stage, "kvserve_client", "_pb", "generation.proto"))
            well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
            rc = protoc.main(["protoc", f"-I{stage}", f"-I{well_known}", f"--python_out={self.build_lib}",
                              f"--pyi_out={self.build_lib}", f"--grpc_python_out={self.build_lib}",
                              os.path.join(stage, "kvserve_client", "_pb", "generation.proto")])
        if rc != 0:
            raise SystemExit(f"kvserve_client: protoc failed ({rc})")
        open(os.path.join(out_dir, "__init__.py"), "w").close()


setup(cmdclass={"build_py": BuildWithStubs})
