"""Ranch's node state machine: base state + flags, events, effects, one transition table.

Import a name from the module that defines it (ranch.statemachine.model.NodeState,
ranch.statemachine.table.apply): nothing is re-exported here, so
`import ranch.statemachine.names` does not pay for the transition table.
"""
