"""Who a client is and what it may do: principals, SCRAM credentials, ACLs, the authorizer."""
