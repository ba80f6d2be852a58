"""Reports over the batch history: turnaround statistics, charts and the HTML report."""
