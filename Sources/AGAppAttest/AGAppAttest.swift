// AGAppAttest
