-- Record scenario $name's header; its rows go to scenario_allocations.
INSERT INTO scenarios VALUES ($name, now()::TIMESTAMP, $command, $options, $at, $base)
