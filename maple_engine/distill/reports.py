"""What a distilled job's last run measured and saved, kept under the storage root
(``distill/NAME/report.json``) for the summary, the Dagster metadata and ``maple costs``."""

import dataclasses
from typing import Any

import orjson

from maple_engine.storage.layout import DISTILL, DistillPaths
from maple_engine.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class DistillReport:
    """What a distilled run measured and saved."""

    rows: int
    distilled: int
    llm_rows: int
    sample: int
    held_out: int
    agreement: float  # of the classifier with the LLM on the held-out rows
    accepted_agreement: float  # of the held-out rows at or over the threshold
    classifier: str
    refused: str | None  # the gate's line, when it refused
    embedding_cost_usd: float  # every run's, from the cost ledger
    llm_cost_usd: float
    all_llm_cost_usd: float  # estimated: every row sent to the LLM at its cost per row

    def lines(self) -> list[str]:
        """The summary's lines."""
        spent = self.embedding_cost_usd + self.llm_cost_usd
        return [
            f"{'distilled':<15}{self.distilled:,} of {self.rows:,} rows answered by classifier "
            f"{self.classifier}; {self.llm_rows:,} by the LLM",
            f"{'agreement':<15}{self.agreement:.1%} with the LLM on {self.held_out:,} held-out "
            f"sample rows ({self.accepted_agreement:.1%} of those over the threshold)",
            f"{'distill USD':<15}{spent:.6f} (embeddings {self.embedding_cost_usd:.6f}, LLM "
            f"{self.llm_cost_usd:.6f}) against {self.all_llm_cost_usd:.6f} estimated for "
            "every row through the LLM",
        ]

    def metadata(self) -> dict[str, Any]:
        """The figures as Dagster metadata values (no None)."""
        return dataclasses.asdict(self) | {"refused": self.refused or ""}


def write_report(storage: Storage, job: str, report: DistillReport) -> None:
    storage.write_bytes(DistillPaths(job).report, orjson.dumps(dataclasses.asdict(report)))


def read_reports(storage: Storage) -> dict[str, DistillReport]:
    """Every distilled job's last report under the storage root, by job name."""
    found: dict[str, DistillReport] = {}
    for folder in storage.list_keys(DISTILL):
        job = folder.rsplit("/", 1)[-1]
        key = DistillPaths(job).report
        if storage.exists(key):
            found[job] = DistillReport(**orjson.loads(storage.read_bytes(key)))
    return found
