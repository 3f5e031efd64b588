// AGTestSupport
