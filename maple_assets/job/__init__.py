"""What a job does, step by step: sharding, submission, collection, retries, merge, its state
under the storage root, its versions, budget, queue share and deadline."""
