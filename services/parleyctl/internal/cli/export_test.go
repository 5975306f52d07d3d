package cli

// DemoFlow is demoFlow, for the tests of demo.
var DemoFlow = demoFlow
