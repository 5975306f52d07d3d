package cli

// DemoFlow is demoFlow, for the tests of demo.
var DemoFlow = demoFlow

// DemoAIFlow is demoAIFlow, for the tests of demo.
var DemoAIFlow = demoAIFlow
