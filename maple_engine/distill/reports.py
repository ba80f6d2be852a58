"""What a distilled job's last run measured and saved, kept under the storage root
(``distill/NAME/report.json``) for the summary, the Dagster metadata and ``maple costs``."""

import dataclasses
from typing import Any

import orjson
import polars as pl

from maple_engine.distill.classifier import Classifier
from maple_engine.distill.plan import Decision, gate_line
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


#: what a job whose LLM answered no sample row reports
_NONE = Classifier("", "", (), (), (), 0, 0, 0.0, None, 0.0, 0.0)


def report_of(
    classifier: Classifier | None, target: float, decision: Decision, answers: pl.DataFrame,
    rows: int, *, embedding_cost_usd: float, llm_cost_usd: float,
) -> DistillReport:  # fmt: skip
    """What a run measured (``target``: ``--distill-agreement``), and its cost (the embedding
    and LLM jobs' spend, every run's) against sending every row to the LLM (at the LLM's mean
    cost per answered row)."""
    answered = answers.filter(pl.col("llm_status") == "succeeded")
    per_row = float(answered["llm_cost_usd"].sum()) / max(1, answered.height)
    distilled = int(decision.distilled.sum())
    found = classifier or _NONE
    refused = None if found.distills else gate_line(found, target)
    return DistillReport(
        rows=rows, distilled=distilled, llm_rows=rows - distilled,
        sample=found.trained_on + found.held_out, held_out=found.held_out,
        agreement=found.agreement, accepted_agreement=found.accepted_agreement,
        classifier=found.version, refused=refused, embedding_cost_usd=embedding_cost_usd,
        llm_cost_usd=llm_cost_usd, all_llm_cost_usd=per_row * rows,
    )  # fmt: skip


def write_report(storage: Storage, job: str, report: DistillReport) -> None:
    storage.write_bytes(DistillPaths(job).report, orjson.dumps(dataclasses.asdict(report)))


def distilled_jobs(storage: Storage) -> list[str]:
    """The names of the distilled jobs under the storage root (each has a ``_distill`` folder
    from its first run on)."""
    return [folder.rsplit("/", 1)[-1] for folder in storage.list_keys(DISTILL)]


def read_reports(storage: Storage) -> dict[str, DistillReport]:
    """Every distilled job's last report under the storage root, by job name."""
    found: dict[str, DistillReport] = {}
    for job in distilled_jobs(storage):
        key = DistillPaths(job).report
        if storage.exists(key):
            found[job] = DistillReport(**orjson.loads(storage.read_bytes(key)))
    return found
