package com.example;

import com.example.Greeter;

/**
 * The Java application.
 */
@Deprecated
public class App extends Base implements Runnable {
    private final Greeter greeter = new Greeter();

    /** Run it. */
    @Override
    public void run() {
        greeter.greet("world");
        this.stop();
    }

    void stop() {}
}
