"""pi: the RPC-host adapter and the host process that runs `pi --mode rpc`."""
