"""The engine: workqueue, runner, controller (informers, leader election) and audit recording."""
