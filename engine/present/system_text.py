"""What the System page says about this machine and the database: the packages' versions
(from their metadata: the dashboard never imports a framework), one line on the machine, one
on the runs by status. No Streamlit."""

from __future__ import annotations

import importlib.metadata

__all__ = ["PACKAGES", "package_versions", "machine_line", "database_line", "status_line",
           "metric_label"]

PACKAGES = ("torch", "torchvision", "tensorflow-cpu", "keras", "numpy", "duckdb",
            "streamlit", "plotly", "pandas", "pyarrow")


def package_versions(packages=PACKAGES) -> list[dict]:
    """{"package", "version"} per distribution, "not installed" for an absent one."""
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"
    return [{"package": p, "version": version(p)} for p in packages]


def machine_line(info: dict, commit: str | None) -> str:
    """engine.run.process.machine.system_info() and the project's commit, as one Markdown line."""
    return (f"**CPU** {info['cpu_model']} · {info['sockets']} socket(s) · **OS** "
            f"{info['platform']} · **Python** {info['python']} · **host** {info['hostname']} "
            f"· **project commit** `{commit or 'unknown'}`")


def database_line(path: str, size_bytes: int, migrations: list[str]) -> str:
    return (f"`{path}` · {size_bytes / 2**20:.1f} MiB on disk · migrations: "
            f"{', '.join(migrations)}")


def status_line(status: dict[str, int]) -> str:
    return "Runs by status: " + " · ".join(f"**{k}** {v}" for k, v in status.items())


def metric_label(table: str) -> str:
    """A table's row count's label: 'run_samples' -> 'run samples'."""
    return table.replace("_", " ")
