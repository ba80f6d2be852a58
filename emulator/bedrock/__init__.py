"""Amazon Bedrock batch inference: jobs over S3, Claude and Titan embedding records."""
